/**
 * Hostile clients (issue 45), each written as the attacker wrote it: raw WebSocket frames that are never read,
 * Engine.IO handshakes and Socket.IO packets by hand over HTTP long-polling or a raw WebSocket, against real
 * servers. Each test is named after what broke.
 */
import { once } from 'node:events'
import { createServer, type Server as HttpServer, type IncomingMessage } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import type { Duplex } from 'node:stream'
import { fixedWindow } from '@ratewindow/core'
import { Server, type Socket } from 'socket.io'
import { io as ioClient } from 'socket.io-client'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { until } from '../../../test/support/connections.js'
import { limitWebSockets, type MessageRefusal, refusalMessage } from '../src/index.js'
import { limitSocketIo, type SocketIoLimitsOptions } from '../src/socket.io.js'
import { type CommonOptions, HARNESSES, SOCKET_IO, type TestServer } from './harness.js'
import { Polling, type RawWebSocket, rawSocketIo, rawUpgrade, rawWebSocket } from './raw.js'

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
    // Socket.IO: the CONNECT to `/` was one of the 5.
    const admitted = harness === SOCKET_IO ? 4 : 5
    expect(server.delivered).toEqual([...Array(admitted).fill('x'), DONE])
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

describe('Socket.IO: a handshake is a request without the sid of an open connection', () => {
  it("an empty sid skips no limit (10 of 10 connections at a limit of 1; 'sid=' after a real sid too)", async () => {
    const server = await started(SOCKET_IO, { connections: { limit: 1 } })
    const joined: string[] = []
    const first = new Polling(server.port, { 'x-user': 'mallory' })
    await first.handshake()
    joined.push(await first.join())
    for (const query of [...Array(9).fill('&sid='), `&sid=${first.sid}&sid=`]) {
      const attacker = new Polling(server.port, { 'x-user': 'mallory' })
      if ((await attacker.handshake(query)) === 200) joined.push(await attacker.join())
    }
    expect(joined.filter((answer) => answer.startsWith('0{'))).toHaveLength(1)
  })

  it('an empty sid skips no message limit (200 of 200 events at a limit of 10)', async () => {
    const server = await started(SOCKET_IO, {
      messagesPerConnection: { rules: fixedWindow({ limit: 10, window: '1h' }) },
      cost: (message: unknown) => (textOf(message) === DONE ? 0 : 1),
      maxPending: 256, // each event waits for its decision: none is refused as busy
    } as CommonOptions)
    const attacker = new Polling(server.port, { 'x-user': 'mallory' })
    expect(await attacker.handshake('&sid=')).toBe(200)
    expect(await attacker.join()).toMatch(/^0\{/)
    await attacker.post(...Array(200).fill('2["message","m"]'), `2["message","${DONE}"]`)
    await until(() => server.delivered.includes(DONE), 'every event decided')
    expect(server.delivered).toHaveLength(10) // 9 and `done`: the CONNECT was one of the 10
  })

  it('an unknown sid is a handshake that Engine.IO refuses: its slot comes back', async () => {
    const server = await started(SOCKET_IO, { connections: { limit: 1 } })
    for (let i = 0; i < 3; i++) expect(await new Polling(server.port).handshake('&sid=forged')).toBe(400)
    const client = new Polling(server.port)
    await client.handshake()
    expect(await client.join()).toMatch(/^0\{/)
  })
})

describe('Socket.IO: a handshake that Engine.IO drops without an event gives back what it took', () => {
  const VALID_KEY = 'dGhlIHNhbXBsZSBub25jZQ=='
  /** Upgrade sockets the server holds open now (the attacker's, until the server sees them closed). */
  const upgradesOpen = (server: HttpServer) => {
    let open = 0
    server.on('upgrade', (_request, socket: Duplex) => {
      open++
      socket.once('close', () => open--)
    })
    return () => open
  }

  it.each([
    ['an upgrade with transport=polling', '/socket.io/?EIO=4&transport=polling', VALID_KEY],
    [
      'an upgrade with a malformed Sec-WebSocket-Key',
      '/socket.io/?EIO=4&transport=websocket',
      'not-a-valid-key',
    ],
  ])(
    '%s gives its connection slot back (3 of them locked the key out for the lease)',
    async (_name, path, key) => {
      const { port, server } = await socketIoServer({ connections: { limit: 3 } })
      const open = upgradesOpen(server)
      for (let i = 0; i < 3; i++) await rawUpgrade(port, path, key, { 'x-user': 'mallory' })
      await until(() => open() === 0, "the server saw the attacker's sockets close")
      const joined: string[] = []
      for (let i = 0; i < 3; i++) {
        const client = new Polling(port, { 'x-user': 'mallory' })
        await client.handshake()
        joined.push(await client.join())
      }
      expect(joined.filter((answer) => answer.startsWith('0{'))).toHaveLength(3)
    },
  )

  it("a refused one is no refused session once it is gone (1,010 of them: everyone's refusals were HTTP 429 after)", async () => {
    const { port, server } = await socketIoServer({ upgrade: { limit: 1, window: '1m' } })
    const open = upgradesOpen(server)
    const victim = new Polling(port, { 'x-user': 'ann' })
    expect(await victim.handshake()).toBe(200) // ann's one handshake: her next is refused
    expect(await new Polling(port, { 'x-user': 'mallory' }).handshake()).toBe(200)
    const path = '/socket.io/?EIO=4&transport=polling'
    for (let sent = 0; sent < 1_010; sent += 202)
      await Promise.all(
        Array.from({ length: 202 }, () => rawUpgrade(port, path, VALID_KEY, { 'x-user': 'mallory' })),
      )
    await until(() => open() === 0, "the server saw the attacker's sockets close")
    const refused = new Polling(port, { 'x-user': 'ann' })
    expect(await refused.handshake()).toBe(200) // a session that tells her why, not 429
    expect(await refused.join()).toMatch(/^4\{"message":"rate_limited"/)
  })

  it('a client that leaves while its handshake is decided gets no connection that holds its slot', async () => {
    let decide = () => {}
    const decided = new Promise<void>((resolve) => {
      decide = resolve
    })
    const { port, io, server } = await socketIoServer({
      connections: { limit: 1 },
      key: async () => {
        await decided
        return 'mallory'
      },
    })
    let opened = 0
    io.engine.on('connection', () => opened++)
    const socket = connect(port, '127.0.0.1')
    socket.on('error', () => {})
    await once(socket, 'connect')
    socket.end('GET /socket.io/?EIO=4&transport=polling HTTP/1.1\r\nHost: x\r\n\r\n')
    socket.destroy()
    await until(
      () => new Promise<boolean>((resolve) => server.getConnections((_error, count) => resolve(count === 0))),
      'the server saw the client leave',
    )
    decide()
    const client = new Polling(port)
    await until(
      () => opened >= 1 && io.engine.clientsCount === 0,
      () => `${io.engine.clientsCount} open`,
    )
    await client.handshake()
    expect(await client.join()).toMatch(/^0\{/)
  })
})

describe('Socket.IO: a refused event reaches no listener', () => {
  it('onAny and prependAny see only admitted events (20 of 20 at a limit of 5)', async () => {
    const seen = { any: 0, prepended: 0, done: false }
    const { port } = await socketIoServer(
      {
        messagesPerConnection: { rules: fixedWindow({ limit: 5, window: '1h' }) },
        cost: (message) => (message.event === DONE ? 0 : 1),
      },
      (io) =>
        io.on('connection', (socket) => {
          socket.onAny((event) => event === 'm' && seen.any++)
          socket.prependAny((event) => event === 'm' && seen.prepended++)
          socket.on(DONE, () => (seen.done = true))
        }),
    )
    const client = track(await rawSocketIo(port))
    client.send('40')
    await until(() => client.packets().some((packet) => packet.startsWith('0{')), 'joined /')
    client.send(...Array(20).fill('42["m"]'), `42["${DONE}"]`)
    await until(() => seen.done, 'every event decided')
    expect(seen).toMatchObject({ any: 4, prepended: 4 }) // 5, less the CONNECT
  })

  it('nor across namespaces, whose CONNECTs count too (500 of 500 across 50 namespaces)', async () => {
    const seen = { any: 0, done: false }
    const { port } = await socketIoServer(
      {
        messagesPerConnection: { rules: fixedWindow({ limit: 20, window: '1h' }) },
        cost: (message) => (message.event === DONE ? 0 : 1),
        maxPending: 128,
      },
      (io) =>
        io.of(/^\/n\d+$/).on('connection', (socket) => {
          socket.onAny((event) => event === 'm' && seen.any++)
          socket.on(DONE, () => (seen.done = true))
        }),
    )
    const client = track(await rawSocketIo(port))
    const namespaces = Array.from({ length: 10 }, (_, i) => `/n${i}`)
    client.send(...namespaces.map((namespace) => `40${namespace},`))
    await until(() => client.packets().filter((packet) => packet.startsWith('0/n')).length === 10, 'joined')
    client.send(
      ...namespaces.flatMap((namespace) => Array(10).fill(`42${namespace},["m"]`)),
      `42/n9,["${DONE}"]`,
    )
    await until(() => seen.done, 'every event decided')
    expect(seen.any).toBe(10) // 20, less the 10 CONNECTs
  })
})

describe('Socket.IO: namespace joins are counted and bounded', () => {
  /** A server with dynamic namespaces `/dyn-<n>`, counting the sockets that joined and the namespaces made. */
  async function dynamic(options: SocketIoLimitsOptions) {
    const counts = { joined: 0, created: 0, done: false }
    const { port } = await socketIoServer(
      { cost: (message) => (message.event === DONE ? 0 : 1), ...options },
      (io) => {
        io.on('new_namespace', () => counts.created++)
        io.of(/^\/dyn-\d+$/).on('connection', (socket) => {
          counts.joined++
          socket.on(DONE, () => (counts.done = true))
        })
      },
    )
    const client = track(await rawSocketIo(port))
    const answers = (prefix: string) => client.packets().filter((packet) => packet.startsWith(prefix))
    return { counts, client, answers }
  }

  it('CONNECT packets count against the messages (20,000 namespaces opened on one limited connection)', async () => {
    const { counts, client, answers } = await dynamic({
      messagesPerConnection: { rules: fixedWindow({ limit: 10, window: '1h' }) },
      clock: () => 0,
    })
    client.send(...Array.from({ length: 30 }, (_, i) => `40/dyn-${i},`))
    await until(() => answers('0/dyn-').length === 10 && answers('4/dyn-').length === 1, 'the answers')
    client.send(`42/dyn-0,["${DONE}"]`)
    await until(() => counts.done, 'every packet decided')
    expect(counts).toMatchObject({ joined: 10, created: 10 })
    expect(JSON.parse(answers('4/dyn-')[0]!.replace(/^4\/dyn-\d+,/, ''))).toMatchObject({
      message: 'rate_limited',
      data: { error: 'rate_limited', reason: 'limit' },
    })
  })

  it('a connection joins at most maxNamespaces at once; a CONNECT past it gets a CONNECT error, and it stays', async () => {
    const { counts, client, answers } = await dynamic({
      messagesPerConnection: { rules: fixedWindow({ limit: 1_000, window: '1h' }) },
    })
    client.send(...Array.from({ length: 40 }, (_, i) => `40/dyn-${i},`))
    await until(() => answers('0/dyn-').length + answers('4/dyn-').length === 40, 'the answers')
    expect(answers('0/dyn-')).toHaveLength(32)
    expect(answers('4/dyn-').map((packet) => JSON.parse(packet.replace(/^4\/dyn-\d+,/, '')))).toEqual(
      Array(8).fill({ message: 'too_many_namespaces', data: { error: 'too_many_namespaces', limit: 32 } }),
    )
    // Leaving one makes room for another, on the same connection.
    client.send('41/dyn-0,', '40/dyn-100,')
    await until(() => answers('0/dyn-100,').length === 1, 'joined /dyn-100')
    client.send(`42/dyn-100,["${DONE}"]`)
    await until(() => counts.done, 'an event delivered on the connection')
    expect(counts.joined).toBe(33)
  })
})

describe('Socket.IO: keys and refusals a browser can use', () => {
  it('socketKey counts the per-key limit by the socket (browsers send no headers on the WebSocket transport)', async () => {
    const delivered: Record<string, number> = {}
    const done: string[] = []
    const { port } = await socketIoServer(
      {
        key: () => 'one address', // every client behind one address
        messagesPerKey: { rules: fixedWindow({ limit: 3, window: '1h' }) },
        socketKey: (socket) => String(socket.handshake.auth.user),
        cost: (message) => (message.event === DONE ? 0 : 1),
      },
      (io) =>
        io.on('connection', (socket: Socket) => {
          const user = String(socket.handshake.auth.user)
          socket.on('m', () => (delivered[user] = (delivered[user] ?? 0) + 1))
          socket.on(DONE, () => done.push(user))
        }),
    )
    for (const [i, user] of ['ann', 'bob', 'ann'].entries()) {
      const client = track(await rawSocketIo(port))
      client.send(`40${JSON.stringify({ user })}`)
      await until(() => client.packets().some((packet) => packet.startsWith('0{')), `${user} joined`)
      client.send(...Array(5).fill('42["m"]'), `42["${DONE}"]`)
      await until(() => done.length === i + 1, `${user}'s events decided`)
    }
    expect(delivered).toEqual({ ann: 3, bob: 3 })
  })

  it("a refused connection reaches the client's connect_error with the reason and the wait (was: xhr poll error)", async () => {
    const connect = (port: number) =>
      new Promise<Error & { data?: unknown }>((resolve) => {
        const socket = ioClient(`http://127.0.0.1:${port}`, { reconnection: false, forceNew: true })
        cleanups.push(() => socket.close())
        socket.on('connect', () => resolve(new Error('connected')))
        socket.on('connect_error', resolve)
      })
    const slots = await socketIoServer({ connections: { limit: 1 } })
    expect((await connect(slots.port)).message).toBe('connected')
    const tooMany = await connect(slots.port)
    expect({ message: tooMany.message, data: tooMany.data }).toEqual({
      message: 'rate_limited',
      data: { error: 'rate_limited', reason: 'connections', retryAfter: 1, retryAfterMs: 1_000 },
    })
    const handshakes = await socketIoServer({ upgrade: { limit: 1, window: '1m' } })
    expect((await connect(handshakes.port)).message).toBe('connected')
    const limited = await connect(handshakes.port)
    expect(limited.message).toBe('rate_limited')
    const { reason, retryAfter, retryAfterMs } = limited.data as MessageRefusal
    expect(reason).toBe('limit')
    expect(retryAfter).toBe(Math.ceil(retryAfterMs / 1000))
    expect(retryAfterMs).toBeGreaterThan(0)
  })
})

async function started(harness: typeof SOCKET_IO, options: CommonOptions): Promise<TestServer> {
  const server = await harness.start(options)
  cleanups.push(() => server.close())
  return server
}

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
  return { port: (server.address() as AddressInfo).port, io, server }
}
