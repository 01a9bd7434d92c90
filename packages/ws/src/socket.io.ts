/**
 * `@ratewindow/ws/socket.io`: the engine on a Socket.IO 4 server (4.6 or later). The HTTP limit and the
 * connection slot apply to the handshake (a request that opens an Engine.IO connection: a polling request or a
 * WebSocket upgrade without the `sid` of an open connection), through `io.engine.use`; the slot is given back when
 * the connection closes. A refused handshake reaches the client's `connect_error`. Each connection's events and
 * namespace CONNECTs are decided before Socket.IO reads them (socket-io-gate.ts).
 */
import { type IncomingMessage, ServerResponse } from 'node:http'
import { invalid } from '@ratewindow/core/support'
import type { Namespace, Server, Socket } from 'socket.io'
import { WebSocketLimiter } from './engine.js'
import { type NodeAddressOptions, nodeBinding } from './node.js'
import { checkCount, type MessageRefusal, type WebSocketLimitOptions } from './options.js'
import { type RawSocket, refusalMessage, type UpgradeRefusal, writeRefusal } from './refusal.js'
import { type GateSettings, refuseSession, SocketIoGate } from './socket-io-gate.js'
import { SocketIoHandshakes } from './socket-io-handshakes.js'
import {
  codecOf,
  type EngineConnection,
  type SocketIoInternals,
  type SocketIoMessage,
} from './socket-io-packets.js'

export type { SocketIoMessage } from './socket-io-packets.js'

export interface SocketIoLimitsOptions
  extends WebSocketLimitOptions<IncomingMessage, SocketIoMessage>,
    NodeAddressOptions {
  /**
   * The per-key message limit's key, from the connected socket (after your middlewares): `socket.data.userId`,
   * `socket.handshake.auth`… Browsers send no headers on the WebSocket transport, so the handshake request may
   * not say who the client is; the `auth` of `io(url, { auth })` reaches this. Called once per socket. A
   * connection's namespace CONNECTs count under the handshake's key (`key`). @default the handshake's key
   */
  socketKey?: (socket: Socket) => string | Promise<string>
  /**
   * The event a dropped event answers, when the client asked for no acknowledgement (one that did gets the
   * error as its acknowledgement's argument instead). @default 'rate_limited'
   */
  errorEvent?: string
  /**
   * What the error event, the acknowledgement and a refused connection's `connect_error` (`err.data`) carry.
   * @default `{ error: 'rate_limited', reason, retryAfter, retryAfterMs }` (`retryAfter` in seconds)
   */
  errorMessage?: (refusal: MessageRefusal) => unknown
  /**
   * Packets a connection's write buffer (`conn.writeBuffer.length`) may hold for a refusal reply to be sent: past
   * it the client is not reading, and its refusals go unanswered (`maxUnreadRefusals` of them close it).
   * @default 64
   */
  maxWriteBuffer?: number
  /**
   * Namespaces one connection may have joined, or asked to join, at once; a CONNECT past it is answered with a
   * CONNECT error (`connect_error`: `'too_many_namespaces'`), the connection stays. @default 32
   */
  maxNamespaces?: number
}

/** `SocketIoLimitsOptions`' own defaults (the shared ones are `WEBSOCKET_DEFAULTS`). */
export const SOCKET_IO_DEFAULTS = {
  errorEvent: 'rate_limited',
  maxWriteBuffer: 64,
  maxNamespaces: 32,
  /** Refused handshakes whose sessions may be open at once to tell the client why; past them, HTTP 429. */
  maxRefusedSessions: 1_000,
} as const

/** The limits on one Socket.IO server. */
export interface SocketIoLimits {
  /** Gives up the counters to limits that replace these (tests, reloads, shutdown); see `RateLimiter.release`. */
  close(): void
}

/** The parts of Engine.IO's server the binding uses (`use`: Socket.IO 4.6 and later). */
interface EngineLike {
  use(
    middleware: (request: IncomingMessage, response: unknown, next: (error?: unknown) => void) => void,
  ): void
  on(event: 'connection', listener: (connection: EngineConnection) => void): unknown
  on(event: 'connection_error', listener: (error: { req: IncomingMessage }) => void): unknown
  /** The open connections, by `sid`. */
  clients: Record<string, unknown>
}

const SOCKET_IO_OPTIONS = [
  'clientIp',
  'socketKey',
  'errorEvent',
  'errorMessage',
  'maxWriteBuffer',
  'maxNamespaces',
] as const

/**
 * Limits a Socket.IO 4 server (4.6 or later: `io.engine.use`): connections per key, events per connection and
 * per key, the HTTP limit on the handshake, namespaces per connection.
 * @example limitSocketIo(io, { connections: { limit: 3 }, messagesPerConnection: { rules: fixedWindow({ limit: 20, window: '1s' }) } })
 */
export function limitSocketIo(io: Server, options: SocketIoLimitsOptions = {}): SocketIoLimits {
  const where = 'limitSocketIo()'
  const engine = new WebSocketLimiter<IncomingMessage, SocketIoMessage>(
    options,
    nodeBinding('Socket.IO', options, where),
    SOCKET_IO_OPTIONS,
    where,
  )
  const settings = gateSettings(io, options)
  const report = options.onError ?? ((error: unknown) => console.error('@ratewindow/ws:', error))
  const handshakes = new SocketIoHandshakes(SOCKET_IO_DEFAULTS.maxRefusedSessions)
  /** The open Engine.IO connections' gates (namespace sockets share their connection's limits). */
  const gates = new WeakMap<object, SocketIoGate>()
  const server = io.engine as unknown as EngineLike

  server.use(function rateLimitedHandshake(request, response, next) {
    if (isOfOpenConnection(server, request)) return next()
    engine.admit(request).then(
      (admission) => {
        if (admission.allowed) {
          handshakes.hold(request, response, { admitted: admission.connection })
          return next()
        }
        // NOTE: a refusal in HTTP terms reaches the client as `xhr poll error` at best: the handshake goes on, to
        // a session that answers the client's CONNECT with why. Past `maxRefusedSessions` of them, HTTP it is.
        if (!handshakes.hold(request, response, { refused: admission.why }))
          return refuse(response, admission.refusal)
        next()
      },
      (error) => {
        report(error)
        refuse(response, {
          statusCode: 500,
          headers: {},
          contentType: 'text/plain',
          body: 'Internal Server Error',
        })
      },
    )
  })
  server.on('connection', (connection) => {
    const handshake = handshakes.opened(connection)
    if (handshake === undefined) return
    // NOTE: its client left before Engine.IO opened it (a polling handshake's response closed): what it took
    // is back, and nothing would limit it; nobody reads it (the client never got its sid).
    if (handshake === 'gone') return void connection.close(true)
    if (handshake.admitted !== undefined)
      gates.set(connection, new SocketIoGate(connection, handshake.admitted, settings))
    else refuseSession(connection, settings.codec, settings.errorMessage(handshake.refused))
  })
  // A handshake admitted and then refused by Engine.IO itself (`allowRequest`, a bad transport, an unknown
  // `sid`) gives back what it took; so does one Engine.IO drops without an event (socket-io-handshakes.ts).
  server.on('connection_error', ({ req }) => handshakes.failed(req))

  const watched = new WeakSet<Namespace>()
  const watch = (namespace: Namespace) => {
    if (watched.has(namespace)) return
    watched.add(namespace)
    namespace.on('connection', (socket: Socket) => gates.get(socket.conn)?.joined(socket))
  }
  for (const namespace of (io as unknown as SocketIoInternals)._nsps.values()) watch(namespace as Namespace)
  io.on('new_namespace', watch)
  return { close: () => engine.close() }
}

/**
 * Whether a request belongs to an open Engine.IO connection: its `sid` (read as Engine.IO reads it, the last
 * one of the query) names a connection Engine.IO has. Anything else (no `sid`, an empty or unknown one) is a
 * handshake: Engine.IO opens a connection for an empty `sid`, and refuses an unknown one after the limits.
 */
function isOfOpenConnection(server: EngineLike, request: IncomingMessage): boolean {
  const query =
    (request as { _query?: Record<string, unknown> })._query ??
    Object.fromEntries(new URL(request.url ?? '/', 'https://socket.io').searchParams)
  const sid = query.sid
  return typeof sid === 'string' && sid !== '' && Object.hasOwn(server.clients, sid)
}

/** The binding's own options, checked and resolved. */
function gateSettings(io: Server, options: SocketIoLimitsOptions): GateSettings {
  const {
    socketKey,
    errorEvent = SOCKET_IO_DEFAULTS.errorEvent,
    errorMessage = refusalMessage,
    maxWriteBuffer = SOCKET_IO_DEFAULTS.maxWriteBuffer,
    maxNamespaces = SOCKET_IO_DEFAULTS.maxNamespaces,
  } = options
  for (const [name, value] of [
    ['socketKey', socketKey],
    ['errorMessage', errorMessage],
  ] as const) {
    if (value !== undefined && typeof value !== 'function')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, value, 'a function')
  }
  if (typeof errorEvent !== 'string' || errorEvent === '')
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'errorEvent',
      errorEvent,
      "a non-empty string such as 'rate_limited'",
    )
  checkCount('maxWriteBuffer', maxWriteBuffer, 0, SOCKET_IO_DEFAULTS.maxWriteBuffer)
  checkCount('maxNamespaces', maxNamespaces, 1, SOCKET_IO_DEFAULTS.maxNamespaces)
  const codec = codecOf(io as unknown as SocketIoInternals)
  return { codec, errorEvent, errorMessage, maxWriteBuffer, maxNamespaces, socketKey }
}

/** Answers a refused handshake: on a polling request's response, or on the raw socket of an upgrade. */
function refuse(response: unknown, refusal: UpgradeRefusal): void {
  if (response instanceof ServerResponse) {
    response.writeHead(refusal.statusCode, { ...refusal.headers, 'Content-Type': refusal.contentType })
    response.end(refusal.body)
    return
  }
  // Engine.IO's stand-in response of an upgrade: it holds the socket, and writes nothing itself.
  writeRefusal((response as { socket: RawSocket }).socket, refusal)
}
