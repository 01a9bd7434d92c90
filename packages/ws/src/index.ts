/**
 * `@ratewindow/ws`: limits for `ws` servers, and for `@fastify/websocket` through the same sockets. Socket.IO is
 * `@ratewindow/ws/socket.io`, Hono's WebSocket helper `@ratewindow/ws/hono`: each entry needs only its server.
 */
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { socketClosed } from '@ratewindow/core/adapter'
import type { RawData, WebSocket, WebSocketServer } from 'ws'
import type { LimitedConnection } from './connection.js'
import { WebSocketLimiter } from './engine.js'
import { type NodeAddressOptions, nodeBinding } from './node.js'
import {
  type BufferedAmountOptions,
  checkCount,
  type MessageRefusal,
  WEBSOCKET_DEFAULTS,
  type WebSocketLimitOptions,
} from './options.js'
import { refusalMessage, writeRefusal } from './refusal.js'

/** One message of a `ws` socket, as its `'message'` event gives it. */
export interface WsMessage {
  data: RawData
  isBinary: boolean
}

export interface WebSocketLimitsOptions
  extends WebSocketLimitOptions<IncomingMessage, WsMessage>,
    NodeAddressOptions,
    BufferedAmountOptions {
  /**
   * The text frame a dropped message answers (`onLimit: 'drop'`; at most one a second per connection).
   * @default JSON: `{"error":"rate_limited","reason":"limit","retryAfter":1,"retryAfterMs":850}` (`retryAfter` in s)
   */
  errorMessage?: (refusal: MessageRefusal) => string
}

/** The part of a Fastify request the hook reads (`@fastify/websocket` adds `ws`). */
export interface FastifyUpgradeRequest {
  /** The client address, after Fastify's `trustProxy` rules. */
  ip: string
  raw: IncomingMessage
  ws?: boolean
  /** The Fastify instance: its `websocketServer` (from `@fastify/websocket`) emits the connections. */
  server: unknown
}

/** The part of a Fastify reply the hook writes a refusal with. */
export interface FastifyUpgradeReply {
  code(statusCode: number): FastifyUpgradeReply
  headers(values: Record<string, string>): FastifyUpgradeReply
  send(payload: string): unknown
}

/** The limits of `limitWebSockets()`: where each server hands its upgrades to them. */
export interface WebSocketLimits {
  /**
   * For a `WebSocketServer` with `noServer: true`: `server.on('upgrade', limits.handleUpgrade(wss))`. Admits
   * each upgrade (HTTP limit, connection slot; a refusal is an HTTP response with its headers), upgrades it with
   * `wss.handleUpgrade`, and emits `'connection'` on `wss` with its messages limited.
   */
  handleUpgrade(wss: WebSocketServer): (request: IncomingMessage, socket: Duplex, head: Buffer) => void
  /**
   * A Fastify hook for `@fastify/websocket` routes (`onRequest`, `preValidation` or `preHandler`): admits the
   * upgrade (the address is Fastify's `request.ip`) or answers the refusal, and limits the messages of the
   * socket the route's handler gets.
   */
  fastify(request: FastifyUpgradeRequest, reply: FastifyUpgradeReply): Promise<unknown>
  /** Gives up the counters to limits that replace these (tests, reloads, shutdown); see `RateLimiter.release`. */
  close(): void
}

const WS_OPTIONS = ['clientIp', 'errorMessage', 'maxBufferedAmount'] as const

/**
 * Limits for `ws` (and `@fastify/websocket`): connections per key, messages per connection and per key, and the
 * HTTP limit on the upgrade request. Options are checked here, at construction.
 * @example
 * const limits = limitWebSockets({ connections: { limit: 3 }, messagesPerConnection: { rules: fixedWindow({ limit: 20, window: '1s' }) } })
 * server.on('upgrade', limits.handleUpgrade(wss))
 */
export function limitWebSockets(options: WebSocketLimitsOptions = {}): WebSocketLimits {
  const where = 'limitWebSockets()'
  /** The address Fastify found for a request, with its trust rules. */
  const fastifyIps = new WeakMap<IncomingMessage, string>()
  const binding = nodeBinding('ws', options, where, (request) => fastifyIps.get(request))
  const engine = new WebSocketLimiter<IncomingMessage, WsMessage>(options, binding, WS_OPTIONS, where)
  const errorMessage = options.errorMessage ?? ((refusal) => JSON.stringify(refusalMessage(refusal)))
  const { maxBufferedAmount = WEBSOCKET_DEFAULTS.maxBufferedAmount } = options
  checkCount('maxBufferedAmount', maxBufferedAmount, 0, WEBSOCKET_DEFAULTS.maxBufferedAmount)
  const report = options.onError ?? ((error: unknown) => console.error('@ratewindow/ws:', error))
  /** Connections admitted by the Fastify hook, until `@fastify/websocket` emits their socket. */
  const admitted = new WeakMap<IncomingMessage, LimitedConnection<WsMessage>>()
  const watched = new WeakSet<object>()

  /** The socket's messages go through the connection's limits before its listeners see them. */
  function watch(ws: WebSocket, connection: LimitedConnection<WsMessage>): void {
    connection.attach(
      (code, reason) => ws.close(code, reason),
      () => ws.bufferedAmount > maxBufferedAmount,
    )
    ws.once('close', () => connection.close())
    const emit = ws.emit
    // NOTE: `ws` has no hook before its 'message' listeners: the socket's own emit is wrapped, so every listener
    // (the application's, @fastify/websocket's, `onmessage`) sees only admitted messages, in arrival order.
    ws.emit = function limitedEmit(this: WebSocket, event: string | symbol, ...args: unknown[]): boolean {
      if (event !== 'message') return emit.call(this, event, ...args)
      connection.receive(
        { data: args[0] as RawData, isBinary: args[1] === true },
        () => emit.call(this, event, ...args),
        (refusal, reply) => {
          if (reply && ws.readyState === ws.OPEN) ws.send(errorMessage(refusal))
        },
      )
      return true
    }
  }

  function refuseWithError(socket: Duplex, error: unknown): void {
    report(error)
    writeRefusal(socket, {
      statusCode: 500,
      headers: {},
      contentType: 'text/plain',
      body: 'Internal Server Error',
    })
  }

  return {
    handleUpgrade: (wss) =>
      function rateLimitedUpgrade(request, socket, head) {
        // Node took its error listener off before 'upgrade': a reset while the limits decide must not crash.
        const guard = () => socket.destroy()
        socket.on('error', guard)
        engine.admit(request).then(
          (admission) => {
            if (!admission.allowed) return writeRefusal(socket, admission.refusal)
            const { connection } = admission
            // The slot is back when the socket closes: after the connection, or a failed upgrade.
            socketClosed(socket, () => connection.close())
            if (socket.destroyed) return
            socket.removeListener('error', guard)
            wss.handleUpgrade(request, socket, head, (ws) => {
              watch(ws, connection)
              wss.emit('connection', ws, request)
            })
          },
          (error) => refuseWithError(socket, error),
        )
      },

    fastify: async function rateLimitedFastifyUpgrade(request, reply) {
      const upgrade = request.raw.headers.upgrade?.toLowerCase() === 'websocket'
      if (request.ws === false || (request.ws === undefined && !upgrade)) return
      const wss = (request.server as { websocketServer?: WebSocketServer }).websocketServer
      if (wss === undefined)
        throw new Error(
          'limits.fastify needs @fastify/websocket: register it before the routes this hook runs on.',
        )
      if (!watched.has(wss)) {
        watched.add(wss)
        wss.on('connection', (ws: WebSocket, raw: IncomingMessage) => {
          const connection = admitted.get(raw)
          if (connection !== undefined && !connection.closed) watch(ws, connection)
        })
      }
      fastifyIps.set(request.raw, request.ip)
      const admission = await engine.admit(request.raw)
      if (!admission.allowed) {
        const { statusCode, headers, contentType, body } = admission.refusal
        return reply
          .code(statusCode)
          .headers({ ...headers, 'content-type': contentType })
          .send(body)
      }
      admitted.set(request.raw, admission.connection)
      socketClosed(request.raw.socket, () => admission.connection.close())
    },

    close: () => engine.close(),
  }
}

// The engine's names, listed once in engine-entry.ts (`@ratewindow/ws/engine`), and this entry's own beside them.
export * from './engine-entry.js'
export type { NodeAddressOptions } from './node.js'
export type { BufferedAmountOptions } from './options.js'
