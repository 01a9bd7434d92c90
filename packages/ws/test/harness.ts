/**
 * The four servers the limits run on, each on a free port of 127.0.0.1 with its real client: `ws` (noServer,
 * `limits.handleUpgrade`), @fastify/websocket (`limits.fastify` as an onRequest hook), Hono with @hono/node-ws
 * (`limits.upgrade` + `limits.events`), Socket.IO 4 (`limitSocketIo`, websocket transport). Each server counts
 * the messages its handler received (`delivered`); each client records what it was told.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import fastifyWebsocket from '@fastify/websocket'
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { createNodeWebSocket } from '@hono/node-ws'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { Server as SocketIoServer } from 'socket.io'
import { io as ioClient } from 'socket.io-client'
import { WebSocket, WebSocketServer } from 'ws'
import { limitHonoWebSockets } from '../src/hono.js'
import { limitWebSockets, type WebSocketLimitOptions } from '../src/index.js'
import { limitSocketIo } from '../src/socket.io.js'

/** The options every harness takes: the shared ones, keyed by the `x-user` header when it is sent. */
export type CommonOptions = WebSocketLimitOptions<never, never>

export interface TestServer {
  port: number
  /** Messages the server's handler received, in order. */
  delivered: string[]
  close(): Promise<void>
}

/**
 * A connected client, or its refusal: the HTTP status and headers of its upgrade; Socket.IO's `connect_error`
 * carries no status, but the refusal (`reason`, as `'connections'`, and the waits).
 */
export type Connected =
  | { ok: true; client: TestClient }
  | { ok: false; status: number; headers: Record<string, string>; refusal?: Told }

/** A refusal as the client is told it. */
export interface Told {
  error: string
  reason: string
  retryAfter: number
  retryAfterMs: number
}

export interface TestClient {
  /** Errors the server told it (error frames, error events, acknowledgements), parsed. */
  told: Told[]
  /** The close code and reason, once closed (Socket.IO: 1008 for a server disconnect). */
  closed: { code: number; reason: string } | undefined
  send(text: string): void
  /** Sends with an acknowledgement (Socket.IO); the answer is recorded in `told` when it is an error. */
  sendWithAck?(text: string): void
  /** Leaves without a closing handshake (the TCP connection is destroyed). */
  terminate(): void
  close(): void
}

export interface Harness {
  name: string
  start(options: CommonOptions): Promise<TestServer>
  connect(port: number, user?: string): Promise<Connected>
}

/**
 * A clock a second further at each look: every refusal is answered (the limits answer at most one a second per
 * connection), for tests that count what each refusal says.
 */
export function everyRefusalTold(): () => number {
  let now = 0
  return () => (now += 1_000)
}

const userKey = (request: IncomingMessage) => String(request.headers['x-user'] ?? 'anonymous')

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return (server.address() as AddressInfo).port
}

/** A `ws` client: an open socket, or the status and headers of the refused upgrade. */
function wsConnect(url: string, user: string): Promise<Connected> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url, { headers: { 'x-user': user } })
    const client: TestClient = {
      told: [],
      closed: undefined,
      send: (text) => socket.send(text),
      terminate: () => socket.terminate(),
      close: () => socket.close(),
    }
    socket.on('message', (data) => client.told.push(JSON.parse(String(data))))
    socket.on('close', (code, reason) => {
      client.closed = { code, reason: String(reason) }
      resolve({ ok: false, status: 0, headers: {} }) // closed before it opened (a promise settles once)
    })
    socket.on('error', () => {})
    socket.on('open', () => resolve({ ok: true, client }))
    socket.on('unexpected-response', (_request, response) => {
      resolve({
        ok: false,
        status: response.statusCode ?? 0,
        headers: response.headers as Record<string, string>,
      })
      response.resume()
      socket.terminate()
    })
  })
}

export const WS: Harness = {
  name: 'ws',
  async start(options) {
    const server = createServer()
    const wss = new WebSocketServer({ noServer: true })
    const limits = limitWebSockets({ key: userKey, ...(options as object) })
    const delivered: string[] = []
    server.on('upgrade', limits.handleUpgrade(wss))
    wss.on('connection', (socket) => socket.on('message', (data) => delivered.push(String(data))))
    const port = await listen(server)
    return {
      port,
      delivered,
      close: async () => {
        limits.close()
        for (const client of wss.clients) client.terminate()
        server.closeAllConnections()
        await new Promise((resolve) => server.close(resolve))
      },
    }
  },
  connect: (port, user = 'alice') => wsConnect(`ws://127.0.0.1:${port}/`, user),
}

export const FASTIFY: Harness = {
  name: '@fastify/websocket',
  async start(options) {
    const app = Fastify()
    await app.register(fastifyWebsocket)
    const limits = limitWebSockets({ key: userKey, ...(options as object) })
    const delivered: string[] = []
    app.addHook('onRequest', limits.fastify)
    app.get('/', { websocket: true }, (socket) => {
      socket.on('message', (data: Buffer) => delivered.push(String(data)))
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    return {
      port: (app.server.address() as AddressInfo).port,
      delivered,
      close: async () => {
        limits.close()
        app.server.closeAllConnections()
        await app.close()
      },
    }
  },
  connect: (port, user = 'alice') => wsConnect(`ws://127.0.0.1:${port}/`, user),
}

export const HONO: Harness = {
  name: 'Hono (@hono/node-ws)',
  async start(options) {
    const app = new Hono()
    const { injectWebSocket, upgradeWebSocket, wss } = createNodeWebSocket({ app })
    const limits = limitHonoWebSockets({
      getConnInfo,
      key: (c) => c.req.header('x-user') ?? 'anonymous',
      ...(options as object),
    })
    const delivered: string[] = []
    app.get(
      '/',
      limits.upgrade,
      upgradeWebSocket(
        limits.events(() => ({ onMessage: (event) => void delivered.push(String(event.data)) })),
      ),
    )
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server
    injectWebSocket(server)
    await once(server, 'listening')
    return {
      port: (server.address() as AddressInfo).port,
      delivered,
      close: async () => {
        limits.close()
        for (const client of wss.clients) client.terminate()
        server.closeAllConnections()
        await new Promise((resolve) => server.close(resolve))
      },
    }
  },
  connect: (port, user = 'alice') => wsConnect(`ws://127.0.0.1:${port}/`, user),
}

export const SOCKET_IO: Harness = {
  name: 'Socket.IO',
  async start(options) {
    const server = createServer()
    const io = new SocketIoServer(server)
    const limits = limitSocketIo(io, { key: userKey, ...(options as object) })
    const delivered: string[] = []
    io.on('connection', (socket) => {
      socket.on('message', (text: string, ack?: (answer: unknown) => void) => {
        delivered.push(text)
        ack?.('ok')
      })
    })
    const port = await listen(server)
    return {
      port,
      delivered,
      close: async () => {
        limits.close()
        io.disconnectSockets(true)
        server.closeAllConnections()
        await io.close()
      },
    }
  },
  connect: (port, user = 'alice') =>
    new Promise((resolve) => {
      const socket = ioClient(`http://127.0.0.1:${port}`, {
        transports: ['websocket'],
        extraHeaders: { 'x-user': user },
        reconnection: false,
        forceNew: true,
      })
      const client: TestClient = {
        told: [],
        closed: undefined,
        send: (text) => socket.emit('message', text),
        sendWithAck: (text) =>
          socket.emit('message', text, (answer: unknown) => {
            if (typeof answer === 'object' && answer !== null)
              client.told.push(answer as TestClient['told'][0])
          }),
        terminate: () =>
          (socket.io.engine as unknown as { transport: { ws?: WebSocket } }).transport.ws?.terminate(),
        close: () => socket.disconnect(),
      }
      socket.on('rate_limited', (error) => client.told.push(error))
      socket.on('disconnect', (reason) => {
        client.closed = { code: reason === 'io server disconnect' ? 1008 : 1000, reason }
      })
      socket.on('connect', () => resolve({ ok: true, client }))
      socket.on('connect_error', (error) => {
        const { data } = error as { data?: Told }
        resolve({ ok: false, status: 0, headers: {}, refusal: data })
        socket.close()
      })
    }),
}

export const HARNESSES = [WS, FASTIFY, HONO, SOCKET_IO] as const
