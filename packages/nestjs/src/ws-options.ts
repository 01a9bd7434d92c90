/**
 * `RateWindowWsModule.forRoot()`'s options: their types, their defaults in one place, and their checks, run once
 * when the module is built.
 */
import type { IncomingMessage } from 'node:http'
import type { Awaitable } from '@ratewindow/core'
import { invalid, rejectUnknownOptions, requireObject } from '@ratewindow/core/support'
import { WEBSOCKET_DEFAULTS, type WebSocketLimitOptions } from '@ratewindow/ws/engine'

/** One message a gateway handler receives: its pattern (`@SubscribeMessage('chat')`) and its data. */
export interface NestWsMessage {
  event: string
  data: unknown
}

/** `RateWindowWsModule.forRoot()` options: how the module's limiters count the messages of a gateway. */
export interface RateWindowWsOptions {
  /**
   * Count each connection's messages on its own (`'connection'`), or every connection of a key together
   * (`'key'`: with a shared store such as Redis, across processes). @default 'connection'
   */
  per?: 'connection' | 'key'
  /**
   * The client's key, from the handshake request (Socket.IO's `socket.request`, the `ws` upgrade request).
   * @default the module's `key` called with the handshake request, else the socket's address, IPv6 masked
   */
  key?: (request: IncomingMessage) => Awaitable<string>
  /**
   * Past the limit: `'drop'` refuses the message with a `RateLimitWsException` (Nest's exception filter sends
   * the client an `exception` event, `{ error: 'rate_limited', reason, retryAfter }`; a Socket.IO client that
   * asked for an acknowledgement gets the same object as its answer, at most once a second and not while it is
   * not reading); `'close'` closes the connection (`ws`: code 1008; Socket.IO: the `exception` event, then a
   * disconnect). @default 'drop'
   */
  onLimit?: WebSocketLimitOptions<IncomingMessage, NestWsMessage>['onLimit']
  /** What one message costs. @default 1 */
  cost?: WebSocketLimitOptions<IncomingMessage, NestWsMessage>['cost']
  /** Messages of one connection waiting for the store at once; one more is refused as `'busy'`. @default 64 */
  maxPending?: number
  /** The reason of a 1008 close (`ws`), cut to 123 bytes of UTF-8. @default 'rate limited' */
  closeReason?: WebSocketLimitOptions<IncomingMessage, NestWsMessage>['closeReason']
  /**
   * Refused messages a client may send in a row while it is not reading (its outgoing buffer over
   * `maxWriteBuffer` or `maxBufferedAmount`, counting the `exception` events Nest is about to queue for it),
   * before it is closed (`ws`: code 1008; Socket.IO: disconnected). Nest answers every refused message with an
   * `exception` event, which the guard cannot stop: this bounds what a client that floods and never reads makes
   * the server hold. @default 100
   */
  maxUnreadRefusals?: number
  /**
   * Socket.IO: packets a client's outgoing buffer (`socket.conn.writeBuffer`) may hold before the client counts
   * as not reading (`@ratewindow/ws/socket.io`'s `maxWriteBuffer`). @default 64
   */
  maxWriteBuffer?: number
  /**
   * `ws`: bytes a client's outgoing buffer (`bufferedAmount`) may hold before the client counts as not reading
   * (`@ratewindow/ws`'s `maxBufferedAmount`). @default 65536 (64 KiB)
   */
  maxBufferedAmount?: number
  /** Receives what fails out of the client's sight (a `cost` function that throws). @default console.error */
  onError?: (error: unknown) => void
}

/**
 * `RateWindowWsOptions`' defaults that the guard resolves itself (the others are `@ratewindow/ws`'s
 * `WEBSOCKET_DEFAULTS`). The buffer bounds are @ratewindow/ws's: `SOCKET_IO_DEFAULTS.maxWriteBuffer` and
 * `WEBSOCKET_DEFAULTS.maxBufferedAmount`.
 */
export const RATEWINDOW_WS_DEFAULTS = {
  per: 'connection',
  maxUnreadRefusals: WEBSOCKET_DEFAULTS.maxUnreadRefusals,
  maxWriteBuffer: 64,
  maxBufferedAmount: WEBSOCKET_DEFAULTS.maxBufferedAmount,
} as const

const WS_OPTION_NAMES = [
  'per',
  'key',
  'onLimit',
  'cost',
  'maxPending',
  'closeReason',
  'maxUnreadRefusals',
  'maxWriteBuffer',
  'maxBufferedAmount',
  'onError',
] as const

/** Checks `RateWindowWsModule.forRoot()`'s options: the guard's own here, the engine's when it is built. */
export function checkWsOptions(options: RateWindowWsOptions): void {
  requireObject(options, 'RateWindowWsModule.forRoot()', "{ per: 'connection', onLimit: 'drop' }")
  rejectUnknownOptions(options, WS_OPTION_NAMES, 'RateWindowWsModule.forRoot()')
  if (options.per !== undefined && options.per !== 'connection' && options.per !== 'key')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'per', options.per, "'connection' or 'key'")
  for (const [name, min] of [
    ['maxUnreadRefusals', 1],
    ['maxWriteBuffer', 0],
    ['maxBufferedAmount', 0],
  ] as const) {
    const value = options[name]
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= min))
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        name,
        value,
        `a whole number >= ${min} such as ${RATEWINDOW_WS_DEFAULTS[name]}`,
      )
  }
}
