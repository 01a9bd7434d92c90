/**
 * A WebSocket flood from a client that never reads (issue 45), against servers in child processes with a 512 MB
 * heap (`--max-old-space-size=512`): `ws`, @fastify/websocket, Hono (@hono/node-ws) and Socket.IO, each without
 * limits (the control) and with `@ratewindow/ws` (10 messages a minute per connection, `onLimit: 'drop'`, every
 * other option at its default). The client writes the frames as fast as the server takes them and reads nothing.
 * Prints each server's peak RSS and heap (sampled every 20 ms) and whether it survived; passes or fails nothing.
 * Not in `pnpm bench`; it runs on the sources (no build): `pnpm --filter @ratewindow/bench ws-flood [frames]
 * [servers] [variants]`, e.g. `ws-flood 4000000 ws,socket.io limited`.
 */
import { fork } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import { fileURLToPath } from 'node:url'

type Kind = 'ws' | 'fastify' | 'hono' | 'socket.io'
type Variant = 'control' | 'limited'

interface Report {
  peakRss: number
  peakHeap: number
  bytesRead: number
}

const MB = 1024 * 1024

if (process.argv[2] === '--serve') await serve(process.argv[3] as Kind, process.argv[4] as Variant)
else await main()

async function main(): Promise<void> {
  const frames = Number(process.argv[2] ?? 2_000_000)
  const kinds = (process.argv[3] ?? 'ws,fastify,hono,socket.io').split(',') as Kind[]
  const variants = (process.argv[4] ?? 'control,limited').split(',') as Variant[]
  console.log(
    `${frames.toLocaleString('en-US')} frames from a client that never reads; servers with a 512 MB heap`,
  )
  console.log('server              variant   peak RSS   peak heap   frames read   survived')
  for (const kind of kinds) {
    for (const variant of variants) {
      const { report, survived, seconds } = await run(kind, variant, frames)
      console.log(
        `${kind.padEnd(19)} ${variant.padEnd(9)} ${`${Math.round(report.peakRss / MB)} MB`.padStart(8)}   ${`${Math.round(report.peakHeap / MB)} MB`.padStart(9)}   ${`${Math.round((100 * report.bytesRead) / bytesOf(kind, frames))}%`.padStart(11)}   ${survived ? 'yes' : 'NO'} (${seconds} s)`,
      )
    }
  }
}

/** The bytes the client writes: the frames, each masked (6 header bytes), plus Socket.IO's CONNECT. */
function bytesOf(kind: Kind, frames: number): number {
  return frames * (6 + payloadOf(kind).length)
}

/** One frame's payload: a 1-byte message, or the smallest Socket.IO event (`42["m"]`). */
function payloadOf(kind: Kind): string {
  return kind === 'socket.io' ? '42["m"]' : 'x'
}

async function run(kind: Kind, variant: Variant, frames: number) {
  const started = Date.now()
  const child = fork(fileURLToPath(import.meta.url), ['--serve', kind, variant], {
    execArgv: ['--max-old-space-size=512', '--import', 'tsx', '--conditions=@ratewindow/source'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const exited = once(child, 'exit')
  const [port] = (await once(child, 'message')) as [number]
  // The child reports its peaks every 100 ms: the last report stands for a child that died.
  let report: Report = { peakRss: 0, peakHeap: 0, bytesRead: 0 }
  child.on('message', (latest) => (report = latest as Report))
  const socket = await open(kind, port)
  const payload = Buffer.from(payloadOf(kind))
  const frame = Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), Buffer.alloc(4), payload])
  const block = Buffer.concat(Array.from({ length: 10_000 }, () => frame))
  let alive = true
  void exited.then(() => (alive = false))
  for (let sent = 0; sent < frames && alive && !socket.destroyed; sent += 10_000) {
    if (!socket.write(block)) await drained(socket)
  }
  // Until the server has read every byte (or died), at most two minutes.
  const expected = bytesOf(kind, frames)
  while (alive && report.bytesRead < expected && Date.now() - started < 120_000)
    await new Promise((resolve) => setTimeout(resolve, 100))
  // One more report after the last byte read: its refusals decided and answered.
  await new Promise((resolve) => setTimeout(resolve, 300))
  const survived = alive
  socket.destroy()
  child.kill()
  await exited
  return { report, survived, seconds: Math.round((Date.now() - started) / 1000) }
}

/** The socket took what was written, or closed (a server that died closes it). */
function drained(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off('drain', done)
      socket.off('close', done)
      resolve()
    }
    socket.on('drain', done)
    socket.on('close', done)
  })
}

/** A raw WebSocket that reads the upgrade's answer (and Socket.IO's open and CONNECT answers), then nothing. */
async function open(kind: Kind, port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await once(socket, 'connect')
  const path = kind === 'socket.io' ? '/socket.io/?EIO=4&transport=websocket' : '/'
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  )
  let received = ''
  const wait = async (text: string) => {
    while (!received.includes(text)) received += String((await once(socket, 'data'))[0])
  }
  await wait('\r\n\r\n')
  if (kind === 'socket.io') {
    await wait('0{')
    socket.write(Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0x34, 0x30])) // "40": join `/`
    await wait('40{')
  }
  socket.pause()
  return socket
}

/** The server child: `kind` with or without the limits; reports its peaks and the bytes it read, every 100 ms. */
async function serve(kind: Kind, variant: Variant): Promise<void> {
  const { fixedWindow } = await import('@ratewindow/core')
  const limit = { messagesPerConnection: { rules: fixedWindow({ limit: 10, window: '1m' }) } }
  const limited = variant === 'limited'
  let server: Server
  if (kind === 'ws') {
    const { WebSocketServer } = await import('ws')
    const { limitWebSockets } = await import('@ratewindow/ws')
    server = createServer()
    const wss = new WebSocketServer(limited ? { noServer: true } : { server })
    if (limited) server.on('upgrade', limitWebSockets(limit).handleUpgrade(wss))
    wss.on('connection', (socket) => socket.on('message', () => {}))
  } else if (kind === 'fastify') {
    const { default: Fastify } = await import('fastify')
    const { default: fastifyWebsocket } = await import('@fastify/websocket')
    const { limitWebSockets } = await import('@ratewindow/ws')
    const app = Fastify()
    await app.register(fastifyWebsocket)
    if (limited) app.addHook('onRequest', limitWebSockets(limit).fastify)
    app.get('/', { websocket: true }, (socket) => {
      socket.on('message', () => {})
    })
    await app.ready()
    server = app.server
  } else if (kind === 'hono') {
    const { Hono } = await import('hono')
    const { createNodeWebSocket } = await import('@hono/node-ws')
    const { getConnInfo } = await import('@hono/node-server/conninfo')
    const { limitHonoWebSockets } = await import('@ratewindow/ws/hono')
    const app = new Hono()
    const { injectWebSocket, upgradeWebSocket } = createNodeWebSocket({ app })
    const events = () => ({ onMessage: () => {} })
    if (limited) {
      const limits = limitHonoWebSockets({ getConnInfo, ...limit })
      app.get('/', limits.upgrade, upgradeWebSocket(limits.events(events)))
    } else app.get('/', upgradeWebSocket(events))
    const { getRequestListener } = await import('@hono/node-server')
    server = createServer(getRequestListener(app.fetch))
    injectWebSocket(server)
  } else {
    const { Server: SocketIoServer } = await import('socket.io')
    const { limitSocketIo } = await import('@ratewindow/ws/socket.io')
    server = createServer()
    const io = new SocketIoServer(server)
    if (limited) limitSocketIo(io, limit)
    io.on('connection', (socket) => socket.on('m', () => {}))
  }
  const sockets = new Set<Socket>()
  server.on('connection', (socket: Socket) => sockets.add(socket))
  let peakRss = 0
  let peakHeap = 0
  const sample = () => {
    const { rss, heapUsed } = process.memoryUsage()
    peakRss = Math.max(peakRss, rss)
    peakHeap = Math.max(peakHeap, heapUsed)
  }
  setInterval(sample, 20).unref()
  setInterval(() => {
    const bytesRead = [...sockets].reduce((sum, socket) => sum + socket.bytesRead, 0)
    process.send?.({ peakRss, peakHeap, bytesRead } satisfies Report)
  }, 100).unref()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  process.send?.((server.address() as AddressInfo).port)
}
