/**
 * `@ratewindow/ws/socket.io`: the engine on a Socket.IO 4 server. The HTTP limit and the connection slot apply
 * to the handshake (the first request of an Engine.IO connection: a polling request or a WebSocket upgrade),
 * through `io.engine.use`; the slot is given back when the Engine.IO connection closes. Messages (events) are
 * limited on every namespace, before their listeners, through `socket.use`.
 */
import { type IncomingMessage, ServerResponse } from 'node:http'
import type { Namespace, Server, Socket } from 'socket.io'
import type { LimitedConnection } from './connection.js'
import { WebSocketLimiter } from './engine.js'
import { type NodeAddressOptions, nodeBinding } from './node.js'
import { checkCount, type MessageRefusal, type WebSocketLimitOptions } from './options.js'
import { type RawSocket, refusalMessage, type UpgradeRefusal, writeRefusal } from './refusal.js'

/** One Socket.IO event as it arrives: its name and arguments (an acknowledgement callback last, if any). */
export interface SocketIoMessage {
  event: string
  args: unknown[]
}

export interface SocketIoLimitsOptions
  extends WebSocketLimitOptions<IncomingMessage, SocketIoMessage>,
    NodeAddressOptions {
  /**
   * The event a dropped event answers, when the client asked for no acknowledgement (one that did gets the
   * error as its acknowledgement's argument instead). @default 'rate_limited'
   */
  errorEvent?: string
  /**
   * What the error event or acknowledgement carries.
   * @default `{ error: 'rate_limited', reason, retryAfter, retryAfterMs }` (`retryAfter` in seconds)
   */
  errorMessage?: (refusal: MessageRefusal) => unknown
  /**
   * Packets a connection's write buffer (`conn.writeBuffer.length`) may hold for a refusal reply to be sent: past
   * it the client is not reading, and its refusals go unanswered (`maxUnreadRefusals` of them close it).
   * @default 64
   */
  maxWriteBuffer?: number
}

/** `SocketIoLimitsOptions`' own defaults (the shared ones are `WEBSOCKET_DEFAULTS`). */
export const SOCKET_IO_DEFAULTS = {
  errorEvent: 'rate_limited',
  maxWriteBuffer: 64,
} as const

/** The limits on one Socket.IO server. */
export interface SocketIoLimits {
  /** Gives up the counters to limits that replace these (tests, reloads, shutdown); see `RateLimiter.release`. */
  close(): void
}

/** The parts of Engine.IO's server the binding uses (public API of Socket.IO 4.6 and later). */
interface EngineLike {
  use(
    middleware: (request: IncomingMessage, response: unknown, next: (error?: unknown) => void) => void,
  ): void
  on(event: 'connection', listener: (connection: EngineConnection) => void): unknown
  on(event: 'connection_error', listener: (error: { req: IncomingMessage }) => void): unknown
}

interface EngineConnection {
  request: IncomingMessage
  /** Packets waiting for the transport: they grow while the client does not read. */
  writeBuffer: unknown[]
  once(event: 'close', listener: () => void): unknown
  close(): unknown
}

const SOCKET_IO_OPTIONS = ['clientIp', 'errorEvent', 'errorMessage', 'maxWriteBuffer'] as const

/**
 * Limits a Socket.IO 4 server (4.6 or later: `io.engine.use`): connections per key, events per connection and
 * per key, the HTTP limit on the handshake. Call it before creating namespaces other than `/`.
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
  const errorEvent = options.errorEvent ?? SOCKET_IO_DEFAULTS.errorEvent
  const errorMessage = options.errorMessage ?? refusalMessage
  const { maxWriteBuffer = SOCKET_IO_DEFAULTS.maxWriteBuffer } = options
  checkCount('maxWriteBuffer', maxWriteBuffer, 0, SOCKET_IO_DEFAULTS.maxWriteBuffer)
  const report = options.onError ?? ((error: unknown) => console.error('@ratewindow/ws:', error))
  /** Handshakes admitted, until Engine.IO opens (or refuses) their connection. */
  const admitted = new WeakMap<IncomingMessage, LimitedConnection<SocketIoMessage>>()
  /** The open Engine.IO connections and their limits (namespace sockets share their connection's). */
  const connections = new WeakMap<object, LimitedConnection<SocketIoMessage>>()
  const server = io.engine as unknown as EngineLike

  server.use(function rateLimitedHandshake(request, response, next) {
    // Only a handshake opens a connection; the later requests of one (polling, its upgrade) carry its `sid`.
    if (new URL(request.url ?? '/', 'http://engine.io').searchParams.has('sid')) return next()
    engine.admit(request).then(
      (admission) => {
        if (admission.allowed) {
          admitted.set(request, admission.connection)
          return next()
        }
        refuse(response, admission.refusal)
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
    const limited = admitted.get(connection.request)
    if (limited === undefined) return
    admitted.delete(connection.request)
    connections.set(connection, limited)
    connection.once('close', () => limited.close())
    // Until a namespace's socket attaches (and tells the client why first), a close closes the connection.
    limited.attach(
      () => connection.close(),
      () => connection.writeBuffer.length > maxWriteBuffer,
    )
  })
  // A handshake admitted and then refused by Engine.IO itself (`allowRequest`, a bad transport) gives its slot back.
  server.on('connection_error', ({ req }) => {
    admitted.get(req)?.close()
    admitted.delete(req)
  })

  const watch = (namespace: Namespace) =>
    namespace.use((socket, next) => {
      const limited = connections.get(socket.conn)
      if (limited !== undefined) limitEvents(socket, limited)
      next()
    })

  function limitEvents(socket: Socket, limited: LimitedConnection<SocketIoMessage>): void {
    // Socket.IO has no close code: the client is told why (the error event), then disconnected.
    // Socket.IO dispatches an admitted event on the next tick: the disconnect waits for those admitted before.
    limited.attach((_code, _reason, refusal) => {
      socket.emit(errorEvent, errorMessage(refusal))
      process.nextTick(() => socket.disconnect(true))
    })
    socket.use((packet, next) => {
      const [event, ...args] = packet as unknown as [string, ...unknown[]]
      limited.receive(
        { event, args },
        () => next(),
        (refusal, reply) => {
          if (!reply) return
          const ack = args.at(-1)
          if (typeof ack === 'function') ack(errorMessage(refusal))
          else socket.emit(errorEvent, errorMessage(refusal))
        },
      )
    })
  }

  watch(io.sockets)
  io.on('new_namespace', watch)
  return { close: () => engine.close() }
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
