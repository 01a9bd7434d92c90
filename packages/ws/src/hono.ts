/**
 * `@ratewindow/ws/hono`: the engine on Hono's WebSocket helper (`upgradeWebSocket` from `@hono/node-ws` on Node,
 * `hono/bun`, `hono/deno`, `hono/cloudflare-workers`). `limits.upgrade`, a middleware before `upgradeWebSocket`
 * on the route, admits the upgrade request or answers the refusal; `limits.events(...)` wraps the route's events
 * so that `onMessage` sees only admitted messages.
 */
import { type FrameworkBinding, socketClosed } from '@ratewindow/core/adapter'
import { invalid } from '@ratewindow/core/support'
import type { Context, MiddlewareHandler } from 'hono'
import type { WSContext, WSEvents } from 'hono/ws'
import type { LimitedConnection } from './connection.js'
import { WebSocketLimiter } from './engine.js'
import {
  type BufferedAmountOptions,
  checkCount,
  type MessageRefusal,
  WEBSOCKET_DEFAULTS,
  type WebSocketLimitOptions,
} from './options.js'
import { type RawSocket, refusalMessage, writeRefusal } from './refusal.js'

/**
 * A runtime's connection info helper, as Hono ships them: `getConnInfo` from `@hono/node-server/conninfo`,
 * `hono/bun`, `hono/deno` or `hono/cloudflare-workers`.
 */
// biome-ignore lint/suspicious/noExplicitAny: Hono's helpers take a Context of any Env.
export type GetConnInfo = (c: Context<any>) => { remote: { address?: string } }

// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env, as Hono's own middleware types take.
type AnyContext = Context<any>

export interface HonoWebSocketLimitsOptions
  extends WebSocketLimitOptions<AnyContext, MessageEvent>,
    BufferedAmountOptions {
  /**
   * The runtime's connection info helper: the client address is its `remote.address`. This, `clientIp` or `key`
   * is required: Hono itself does not know the client's address.
   */
  getConnInfo?: GetConnInfo
  /** The client address, by your own means (behind a proxy: the address it forwards). */
  clientIp?: (c: AnyContext) => string | undefined
  /**
   * The text frame a dropped message answers (`onLimit: 'drop'`; at most one a second per connection).
   * @default JSON: `{"error":"rate_limited","reason":"limit","retryAfter":1,"retryAfterMs":850}` (`retryAfter` in s)
   */
  errorMessage?: (refusal: MessageRefusal) => string
}

/** The limits of `limitHonoWebSockets()`: a middleware for the upgrade, and a wrapper for the events. */
export interface HonoWebSocketLimits {
  /** Before `upgradeWebSocket` on the route: admits the upgrade, or answers the refusal with its headers. */
  upgrade: MiddlewareHandler
  /** Wraps the route's `createEvents`: `upgradeWebSocket(limits.events((c) => ({ onMessage(event, ws) {…} })))`. */
  events<T>(
    createEvents: (c: AnyContext) => WSEvents<T> | Promise<WSEvents<T>>,
  ): (c: AnyContext) => Promise<WSEvents<T>>
  /** Gives up the counters to limits that replace these (tests, reloads, shutdown); see `RateLimiter.release`. */
  close(): void
}

const HONO_OPTIONS = ['getConnInfo', 'clientIp', 'errorMessage', 'maxBufferedAmount'] as const

/**
 * Limits for Hono's WebSocket helper: connections per key, messages per connection and per key, the HTTP limit
 * on the upgrade request. Options are checked here, at construction.
 * @example app.get('/ws', limits.upgrade, upgradeWebSocket(limits.events(() => ({ onMessage(event, ws) { ws.send(String(event.data)) } }))))
 */
export function limitHonoWebSockets(options: HonoWebSocketLimitsOptions = {}): HonoWebSocketLimits {
  const where = 'limitHonoWebSockets()'
  const engine = new WebSocketLimiter<AnyContext, MessageEvent>(
    options,
    honoBinding(options, where),
    HONO_OPTIONS,
    where,
  )
  const errorMessage = options.errorMessage ?? ((refusal) => JSON.stringify(refusalMessage(refusal)))
  const { maxBufferedAmount = WEBSOCKET_DEFAULTS.maxBufferedAmount } = options
  checkCount('maxBufferedAmount', maxBufferedAmount, 0, WEBSOCKET_DEFAULTS.maxBufferedAmount)
  /** Connections admitted by `upgrade`, until `events` opens them. */
  const admitted = new WeakMap<AnyContext, LimitedConnection<MessageEvent>>()

  const upgrade: MiddlewareHandler = async function rateLimitedUpgrade(c, next) {
    if (c.req.header('upgrade')?.toLowerCase() !== 'websocket') return next()
    const admission = await engine.admit(c)
    const socket = nodeUpgradeSocket(c)
    if (!admission.allowed) {
      const { statusCode, headers, contentType, body } = admission.refusal
      // NOTE: @hono/node-ws answers a refused upgrade with its status alone: the refusal is written whole on the
      // socket first (headers and body), and its own answer then goes nowhere.
      if (socket !== undefined) writeRefusal(socket, admission.refusal)
      return new Response(body, { status: statusCode, headers: { ...headers, 'Content-Type': contentType } })
    }
    const { connection } = admission
    admitted.set(c, connection)
    // On Node, the slot is back when the socket closes: after the connection, or a failed upgrade.
    if (socket !== undefined) socketClosed(socket, () => connection.close())
    await next()
  }

  function events<T>(createEvents: (c: AnyContext) => WSEvents<T> | Promise<WSEvents<T>>) {
    return async function limitedEvents(c: AnyContext): Promise<WSEvents<T>> {
      const events = await createEvents(c)
      const connection = admitted.get(c)
      if (connection === undefined)
        throw new Error('limits.events needs limits.upgrade on the route, before upgradeWebSocket.')
      return {
        ...events,
        onOpen(event: Event, ws: WSContext<T>) {
          connection.attach(
            (code, reason) => ws.close(code, reason),
            () => bufferedAmount(ws) > maxBufferedAmount,
          )
          events.onOpen?.(event, ws)
        },
        onMessage(event, ws) {
          connection.receive(
            event,
            () => events.onMessage?.(event, ws),
            (refusal, reply) => {
              if (reply && ws.readyState === 1) ws.send(errorMessage(refusal))
            },
          )
        },
        onClose(event, ws) {
          connection.close()
          events.onClose?.(event, ws)
        },
      }
    }
  }

  return { upgrade, events, close: () => engine.close() }
}

/** How the client address is found (checked here, at construction), and the proxy warning's advice. */
function honoBinding(options: HonoWebSocketLimitsOptions, where: string): FrameworkBinding<AnyContext> {
  const { getConnInfo, clientIp, key } = options
  for (const [name, value] of [
    ['getConnInfo', getConnInfo],
    ['clientIp', clientIp],
  ] as const) {
    if (value !== undefined && typeof value !== 'function')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, value, 'a function of the context')
  }
  if (getConnInfo === undefined && clientIp === undefined && key === undefined)
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'getConnInfo',
      getConnInfo,
      "a function: Hono does not know the client's address. Pass `getConnInfo` (from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno' or 'hono/cloudflare-workers'), `clientIp(c)` or a `key` function",
    )
  return {
    name: 'Hono',
    clientIp: (c) => clientIp?.(c) ?? getConnInfo?.(c).remote.address,
    untrustedForwardedFor: (c) =>
      c.req.header('x-forwarded-for') === undefined ? undefined : clientIp === undefined && key === undefined,
    trustProxyHint: `pass \`clientIp\` (the address your proxy forwards) or \`key\` to ${where}`,
  }
}

/**
 * The bytes waiting to be sent on a connection, where the runtime tells: `bufferedAmount` (Node's `ws`, Deno),
 * `getBufferedAmount()` (Bun); 0 elsewhere (refusal replies are then paced, one a second, without this bound).
 */
function bufferedAmount(ws: WSContext<unknown>): number {
  const raw = ws.raw as { bufferedAmount?: unknown; getBufferedAmount?: () => unknown } | undefined
  const amount = typeof raw?.getBufferedAmount === 'function' ? raw.getBufferedAmount() : raw?.bufferedAmount
  return typeof amount === 'number' ? amount : 0
}

/** The raw socket of an upgrade request under @hono/node-ws (which passes `incoming` and no `outgoing`). */
function nodeUpgradeSocket(c: AnyContext): RawSocket | undefined {
  const env = c.env as { incoming?: { socket?: RawSocket }; outgoing?: unknown } | undefined
  return env?.outgoing === undefined ? env?.incoming?.socket : undefined
}
