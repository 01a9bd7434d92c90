/** Programs of @ratewindow/ws: ws with @fastify/websocket, Hono with @hono/node-ws, and Socket.IO alone. */

import { loader, type ModuleSystem } from './load.js'

/** @ratewindow/ws on the servers of its main entry: ws, and @fastify/websocket through it. */
export const WS_PROGRAM = `import { createServer } from 'node:http'
import fastifyWebsocket from '@fastify/websocket'
import { fixedWindow } from '@ratewindow/core'
import { limitWebSockets, type MessageRefusal, type WebSocketLimits } from '@ratewindow/ws'
import Fastify from 'fastify'
import { WebSocketServer } from 'ws'

export const limits: WebSocketLimits = limitWebSockets({
  upgrade: { limit: 30, window: '1m' },
  connections: { limit: 3 },
  messagesPerConnection: { rules: fixedWindow({ limit: 20, window: '1s' }) },
  cost: ({ data }) => (Array.isArray(data) ? data.length : 1),
  errorMessage: (refusal: MessageRefusal) => refusal.reason,
})
const wss = new WebSocketServer({ noServer: true })
createServer().on('upgrade', limits.handleUpgrade(wss))

export async function fastify() {
  const app = Fastify()
  await app.register(fastifyWebsocket)
  app.addHook('onRequest', limits.fastify)
  app.get('/ws', { websocket: true }, (socket) => {
    socket.on('message', () => socket.send('ok'))
  })
  return app
}
`

/** @ratewindow/ws/hono with @hono/node-ws. */
export const WS_HONO_PROGRAM = `import { getConnInfo } from '@hono/node-server/conninfo'
import { createNodeWebSocket } from '@hono/node-ws'
import { fixedWindow } from '@ratewindow/core'
import { type HonoWebSocketLimits, limitHonoWebSockets } from '@ratewindow/ws/hono'
import { Hono } from 'hono'

const app = new Hono()
const { upgradeWebSocket } = createNodeWebSocket({ app })
export const limits: HonoWebSocketLimits = limitHonoWebSockets({
  getConnInfo,
  messagesPerKey: { rules: fixedWindow({ limit: 20, window: '1s' }) },
  onLimit: 'close',
})
app.get('/ws', limits.upgrade, upgradeWebSocket(limits.events(() => ({ onMessage: (event, ws) => ws.send(String(event.data)) }))))
export { app }
`

/** @ratewindow/ws/socket.io in a project with Socket.IO alone: no ws types, no Hono. */
export const SOCKET_IO_PROGRAM = `import { createServer } from 'node:http'
import { fixedWindow } from '@ratewindow/core'
import { limitSocketIo, type SocketIoLimits } from '@ratewindow/ws/socket.io'
import { Server } from 'socket.io'

const io = new Server(createServer())
export const limits: SocketIoLimits = limitSocketIo(io, {
  connections: { limit: 3 },
  messagesPerConnection: { rules: fixedWindow({ limit: 20, window: '1s' }) },
  cost: ({ event }) => (event === 'upload' ? 5 : 1),
})
`

/**
 * Runtime check of @ratewindow/ws: a ws server limited to 2 messages per connection; a client sends 3, and sees
 * 2 echoes and 1 error frame (reason "limit").
 */
export function wsRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { createServer } = ${load('node:http')}
  const { fixedWindow } = ${load('@ratewindow/core')}
  const { limitWebSockets } = ${load('@ratewindow/ws')}
  const { WebSocket, WebSocketServer } = ${load('ws')}
  const limits = limitWebSockets({ messagesPerConnection: { rules: fixedWindow({ limit: 2, window: '1m' }) } })
  const wss = new WebSocketServer({ noServer: true })
  wss.on('connection', (socket) => socket.on('message', (data) => socket.send('echo ' + data)))
  const server = createServer()
  server.on('upgrade', limits.handleUpgrade(wss))
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const client = new WebSocket('ws://127.0.0.1:' + server.address().port)
  const frames = []
  await new Promise((resolve, reject) => {
    client.on('error', reject)
    client.on('open', () => ['a', 'b', 'c'].forEach((text) => client.send(text)))
    client.on('message', (data) => {
      frames.push(String(data))
      if (frames.length === 3) resolve()
    })
  })
  client.close()
  server.close()
  if (frames[0] !== 'echo a' || frames[1] !== 'echo b' || JSON.parse(frames[2]).reason !== 'limit')
    throw new Error('frames ' + JSON.stringify(frames))
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/**
 * Runtime check of @ratewindow/ws/socket.io: 3 messages per connection, its namespace CONNECT one of them; a client
 * emits 3 events with acknowledgements and gets 2 answers and 1 refusal.
 */
export function socketIoRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { createServer } = ${load('node:http')}
  const { fixedWindow } = ${load('@ratewindow/core')}
  const { limitSocketIo } = ${load('@ratewindow/ws/socket.io')}
  const { Server } = ${load('socket.io')}
  const { io: connect } = ${load('socket.io-client')}
  const server = createServer()
  const io = new Server(server)
  limitSocketIo(io, { messagesPerConnection: { rules: fixedWindow({ limit: 3, window: '1m' }) } })
  io.on('connection', (socket) => socket.on('chat', (text, ack) => ack('echo ' + text)))
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const client = connect('http://127.0.0.1:' + server.address().port, { transports: ['websocket'] })
  const answers = await Promise.all(['a', 'b', 'c'].map((text) => new Promise((resolve) => client.emit('chat', text, resolve))))
  client.close()
  await io.close()
  if (answers[0] !== 'echo a' || answers[1] !== 'echo b' || answers[2].reason !== 'limit')
    throw new Error('answers ' + JSON.stringify(answers))
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}
