/**
 * Hostile clients (issue 45) of `@ratewindow/nestjs/websockets`, written as the attacker wrote them: raw
 * WebSocket frames (and Socket.IO packets over them) from a client that never reads its socket, against real
 * Nest 12 apps on both gateway platforms. Each test is named after what broke.
 */
import 'reflect-metadata'
import type { IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type INestApplication, Module, UseGuards } from '@nestjs/common'
import { IoAdapter } from '@nestjs/platform-socket.io'
import { WsAdapter } from '@nestjs/platform-ws'
import { Test } from '@nestjs/testing'
import { ConnectedSocket, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets'
import { MemoryStore } from '@ratewindow/core'
import { RateLimit, RateWindowModule, SkipRateLimit } from '@ratewindow/nestjs'
import {
  RATEWINDOW_WS_DEFAULTS,
  RateWindowWsGuard,
  RateWindowWsModule,
  rememberHandshake,
} from '@ratewindow/nestjs/websockets'
import { WEBSOCKET_DEFAULTS } from '@ratewindow/ws'
import { SOCKET_IO_DEFAULTS } from '@ratewindow/ws/socket.io'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { WebSocket } from 'ws'
import { until } from '../../../test/support/connections.js'
import { type RawWebSocket, rawSocketIo, rawWebSocket } from '../../ws/test/raw.js'

/** A download the client never reads: most of it stays in the server's buffers. */
const DOWNLOAD = Buffer.alloc(16 << 20)
/** Messages the attacker sends, past the limit of 1, all in one write. */
const FLOOD = 1_000

/** What the server did with the one client's connection. */
interface Seen {
  /** Messages the limited handler received. */
  delivered: number
  /** Socket.IO: the most packets the connection's write buffer held. ws: frames queued on the open socket. */
  queued: number
  /** Whether the download is stuck in the server's buffers. */
  stuck: () => boolean
  /** Whether the server closed the connection (Socket.IO: disconnected; ws: its close begun). */
  closed: () => boolean
}

const nothingSeen = (): Seen => ({ delivered: 0, queued: 0, stuck: () => false, closed: () => false })
let seen = nothingSeen()
beforeEach(() => {
  seen = nothingSeen()
})

interface SocketIoClient {
  connected: boolean
  conn: { writeBuffer: unknown[]; on(event: 'packetCreate', listener: () => void): unknown }
  emit(event: string, payload: unknown): unknown
}

/** A `ws` socket (platform-ws may load its own copy of `ws`: no `instanceof`). */
const isWebSocket = (client: WebSocket | SocketIoClient): client is WebSocket => 'bufferedAmount' in client

@WebSocketGateway()
@UseGuards(RateWindowWsGuard)
class FloodedGateway {
  handleConnection(client: WebSocket | SocketIoClient, request: IncomingMessage) {
    rememberHandshake(client, request)
    if (isWebSocket(client)) {
      const send = client.send
      // Every frame written while the socket is open is queued behind the download.
      client.send = function countedSend(this: WebSocket, ...args: Parameters<WebSocket['send']>) {
        if (this.readyState === this.OPEN) seen.queued++
        return send.apply(this, args)
      } as WebSocket['send']
      seen.stuck = () => client.bufferedAmount > WEBSOCKET_DEFAULTS.maxBufferedAmount
      seen.closed = () => client.readyState !== client.OPEN
    } else {
      const { conn } = client
      conn.on('packetCreate', () => {
        seen.queued = Math.max(seen.queued, conn.writeBuffer.length + 1)
      })
      seen.stuck = () => conn.writeBuffer.length > 0
      seen.closed = () => !client.connected
    }
  }

  @RateLimit({ limit: 1 })
  @SubscribeMessage('chat')
  chat() {
    seen.delivered++
  }

  @SkipRateLimit()
  @SubscribeMessage('download')
  download(@ConnectedSocket() client: WebSocket | SocketIoClient) {
    if (isWebSocket(client)) client.send(DOWNLOAD)
    else {
      client.emit('download', DOWNLOAD)
      // A packet queued behind the download once it is stuck: the write buffer then holds what follows.
      setImmediate(() => client.emit('more', null))
    }
  }
}

const apps: INestApplication[] = []
const clients: RawWebSocket[] = []
afterEach(async () => {
  for (const client of clients.splice(0)) client.destroy()
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

async function start(platform: 'socket.io' | 'ws'): Promise<number> {
  @Module({
    imports: [
      RateWindowModule.forRoot({ limit: 100, window: '1h', store: new MemoryStore() }),
      RateWindowWsModule.forRoot(),
    ],
    providers: [FloodedGateway],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
  const app = moduleRef.createNestApplication({ logger: false })
  app.useWebSocketAdapter(platform === 'socket.io' ? new IoAdapter(app) : new WsAdapter(app))
  apps.push(app)
  await app.listen(0, '127.0.0.1')
  return (app.getHttpServer().address() as AddressInfo).port
}

describe('a client that floods a guarded gateway and never reads', () => {
  it('Socket.IO: an exception packet was queued for each refused message (1,000 of 1,000), and it stayed connected', async () => {
    const client = await rawSocketIo(await start('socket.io'))
    clients.push(client)
    client.send('40')
    await until(() => client.packets().some((packet) => packet.startsWith('0{')), 'joined /')
    client.pause()
    client.send('42["download"]')
    await until(() => seen.stuck(), 'the download stuck')
    client.send(...Array(FLOOD).fill('42["chat",1]'))
    await until(
      () => seen.closed(),
      () => `the connection closed (${seen.queued} packets queued)`,
    )
    expect(seen.delivered).toBeLessThanOrEqual(1)
    // Nest answers each refused message with an `exception` packet: the guard counts them, and closes the
    // connection once they are past the buffer's bound and `maxUnreadRefusals` more were refused. The close
    // itself queues two (its `exception` and the DISCONNECT); nothing is queued after it.
    const { maxUnreadRefusals } = WEBSOCKET_DEFAULTS
    expect(seen.queued).toBeLessThanOrEqual(SOCKET_IO_DEFAULTS.maxWriteBuffer + maxUnreadRefusals + 2)
  })

  it('ws: an exception frame was queued for each refused message (1,000 of 1,000), and it stayed open', async () => {
    const client = await rawWebSocket(await start('ws'), '/', {}, { paused: true })
    clients.push(client)
    client.send(JSON.stringify({ event: 'download' }))
    await until(() => seen.stuck(), 'the download stuck')
    client.send(...Array(FLOOD).fill(JSON.stringify({ event: 'chat', data: 1 })))
    await until(
      () => seen.closed(),
      () => `the connection closed (${seen.queued} frames queued)`,
    )
    expect(seen.delivered).toBeLessThanOrEqual(1)
    // The download was over the bound already: then at most `maxUnreadRefusals` exception frames.
    expect(seen.queued).toBeLessThanOrEqual(1 + WEBSOCKET_DEFAULTS.maxUnreadRefusals)
  })

  it("the guard's bounds are @ratewindow/ws's defaults", () => {
    expect(RATEWINDOW_WS_DEFAULTS).toMatchObject({
      maxBufferedAmount: WEBSOCKET_DEFAULTS.maxBufferedAmount,
      maxWriteBuffer: SOCKET_IO_DEFAULTS.maxWriteBuffer,
      maxUnreadRefusals: WEBSOCKET_DEFAULTS.maxUnreadRefusals,
    })
  })
})
