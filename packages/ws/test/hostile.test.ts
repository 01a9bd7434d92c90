/**
 * Hostile clients (issue 45), each written as the attacker wrote it: raw WebSocket frames (Socket.IO packets
 * among them) that are never read, against real servers. Each test is named after what broke.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fixedWindow } from '@ratewindow/core'
import { Server, type Socket } from 'socket.io'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { until } from '../../../test/support/connections.js'
import { limitWebSockets, type MessageRefusal, refusalMessage } from '../src/index.js'
import { limitSocketIo, type SocketIoLimitsOptions } from '../src/socket.io.js'
import { type CommonOptions, HARNESSES, SOCKET_IO, type TestServer } from './harness.js'
import { type RawWebSocket, rawSocketIo, rawWebSocket } from './raw.js'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function track<T extends { destroy(): void }>(client: T): T {
  cleanups.push(() => client.destroy())
  return client
}

/** The text a message carries, whatever the server: `ws`'s data, Hono's event, Socket.IO's first argument. */
const textOf = (message: unknown) => {
  const { data, args } = message as { data?: unknown; args?: unknown[] }
  return String(args === undefined ? data : args[0])
}

/** A message `done` costs nothing: once it is delivered, every message sent before it was decided. */
const DONE = 'done'

describe.each(HARNESSES)('$name: a client that floods and never reads', (harness) => {
  it('gets one refusal reply, not one per refused message (681 MB RSS for 2 M frames)', async () => {
    let seen = 0
    let replies = 0
    const server: TestServer = await harness.start({
      messagesPerConnection: { rules: fixedWindow({ limit: 5, window: '1h' }) },
      cost: (message: unknown) => {
        seen++
        return textOf(message) === DONE ? 0 : 1
      },
      errorMessage: (refusal: MessageRefusal) => {
        replies++
        return harness === SOCKET_IO ? refusalMessage(refusal) : JSON.stringify(refusalMessage(refusal))
      },
      clock: () => 0, // time stands still: one reply a second is one reply
    } as CommonOptions)
    cleanups.push(() => server.close())
    const frame = (text: string) => (harness === SOCKET_IO ? `42["message","${text}"]` : text)
    let client: RawWebSocket
    if (harness === SOCKET_IO) {
      const socket = track(await rawSocketIo(server.port, { 'x-user': 'mallory' }))
      socket.send('40')
      await until(() => socket.packets().some((packet) => packet.startsWith('0{')), 'joined /')
      client = socket
    } else client = track(await rawWebSocket(server.port, '/', { 'x-user': 'mallory' }))
    client.pause()
    await client.flood(frame('x'), 2_000)
    await until(
      () => seen >= 2_000,
      () => `the flood read (${seen} of 2,000)`,
    )
    client.send(frame(DONE))
    await until(() => server.delivered.includes(DONE), 'every message decided')
    expect(server.delivered).toEqual(['x', 'x', 'x', 'x', 'x', DONE])
    expect(replies).toBe(1)
  })
})

describe('a client that does not read while its outgoing buffer is over the bound', () => {
  it('ws: gets no refusal reply, and is closed (1008) after maxUnreadRefusals refusals', async () => {
    let replies = 0
    const closes: MessageRefusal[] = []
    const limits = limitWebSockets({
      messagesPerConnection: { rules: fixedWindow({ limit: 1, window: '1h' }) },
      maxUnreadRefusals: 10,
      errorMessage: (refusal) => {
        replies++
        return JSON.stringify(refusal)
      },
      closeReason: (refusal) => {
        closes.push(refusal)
        return 'rate limited'
      },
    })
    const wss = new WebSocketServer({ noServer: true })
    // A download the client never reads: most of it stays in the server's buffer.
    wss.on('connection', (socket) => socket.send(Buffer.alloc(16 << 20)))
    const server = createServer().listen(0, '127.0.0.1')
    server.on('upgrade', limits.handleUpgrade(wss))
    await once(server, 'listening')
    cleanups.push(() => {
      for (const socket of wss.clients) socket.terminate()
      server.closeAllConnections()
      server.close()
    })
    const client = track(
      await rawWebSocket((server.address() as AddressInfo).port, '/', {}, { paused: true }),
    )
    await until(() => [...wss.clients].some((socket) => socket.bufferedAmount > 65_536), 'the download stuck')
    client.send(...Array(50).fill('x'))
    await until(() => closes.length === 1, 'the connection closed')
    expect(replies).toBe(0)
    expect([...wss.clients].map((socket) => socket.readyState)).toEqual([WebSocket.CLOSING])
  })

  it('Socket.IO: answers none past maxWriteBuffer, and closes after maxUnreadRefusals refusals', async () => {
    let replies = 0
    const closes: MessageRefusal[] = []
    const sockets: Socket[] = []
    const { port } = await socketIoServer(
      {
        messagesPerConnection: { rules: fixedWindow({ limit: 1, window: '1h' }) },
        cost: (message) => (message.event === 'start' ? 0 : 1),
        maxWriteBuffer: 0,
        maxUnreadRefusals: 10,
        errorMessage: (refusal) => {
          replies++
          return refusal
        },
        closeReason: (refusal) => {
          closes.push(refusal)
          return 'rate limited'
        },
      },
      (io) =>
        io.on('connection', (socket) => {
          sockets.push(socket)
          // A download the client never reads, and a packet queued behind it.
          socket.on('start', () => {
            socket.emit('history', Buffer.alloc(16 << 20))
            setImmediate(() => socket.emit('more'))
          })
        }),
    )
    const client = track(await rawSocketIo(port))
    client.send('40')
    await until(() => client.packets().some((packet) => packet.startsWith('0{')), 'joined /')
    client.pause()
    client.send('42["start"]')
    const queued = () => (sockets[0]?.conn as unknown as { writeBuffer: unknown[] } | undefined)?.writeBuffer
    await until(() => (queued()?.length ?? 0) > 0, 'the download stuck')
    client.send(...Array(50).fill('42["m"]'))
    await until(
      () => closes.length === 1,
      () => `the connection closed (${replies} replies)`,
    )
    expect(replies).toBe(1) // the error event that goes with the disconnect; none before it
  })
})

/** A Socket.IO server limited by `options` (keyed by `x-user` unless they say), set up by `setup`. */
async function socketIoServer(options: SocketIoLimitsOptions, setup: (io: Server) => void = () => {}) {
  const server = createServer()
  const io = new Server(server)
  const limits = limitSocketIo(io, {
    key: (request: IncomingMessage) => String(request.headers['x-user'] ?? 'anonymous'),
    ...options,
  })
  setup(io)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  cleanups.push(async () => {
    limits.close()
    io.disconnectSockets(true)
    server.closeAllConnections()
    await io.close()
  })
  return { port: (server.address() as AddressInfo).port, io }
}
