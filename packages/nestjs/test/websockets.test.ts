/**
 * `@ratewindow/nestjs/websockets` on real Nest 12 apps, on both gateway platforms (`@nestjs/platform-socket.io`
 * with `socket.io-client`, `@nestjs/platform-ws` with `ws`), on the memory store and Redis: a flooded handler
 * answers exactly its limit, an exempt handler and a gateway without the guard are untouched, and a client that
 * leaves mid-burst holds nothing. The HTTP guard is global in every app (it lets the gateways through).
 */
import 'reflect-metadata'
import { once } from 'node:events'
import type { IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type INestApplication, Module, UseGuards } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import { IoAdapter } from '@nestjs/platform-socket.io'
import { WsAdapter } from '@nestjs/platform-ws'
import { Test } from '@nestjs/testing'
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets'
import { MemoryStore, RedisStore, type Store } from '@ratewindow/core'
import { RateLimit, RateWindowGuard, RateWindowModule, SkipRateLimit } from '@ratewindow/nestjs'
import {
  RateWindowWsGuard,
  RateWindowWsModule,
  type RateWindowWsOptions,
  rememberHandshake,
} from '@ratewindow/nestjs/websockets'
import { io as ioClient } from 'socket.io-client'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { until } from '../../../test/support/connections.js'
import { standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'

const LIMIT = 5

/** What the handlers received, in order. */
const delivered: string[] = []
/** How many clients the limited gateway saw leave. */
let departures = 0

@WebSocketGateway()
@UseGuards(RateWindowWsGuard)
class LimitedGateway {
  handleConnection(client: object, request: IncomingMessage) {
    rememberHandshake(client, request)
  }

  handleDisconnect() {
    departures++
  }

  @RateLimit({ limit: LIMIT })
  @SubscribeMessage('chat')
  chat(@MessageBody() data: number) {
    delivered.push(`chat ${data}`)
    return { ok: data }
  }

  @SkipRateLimit()
  @SubscribeMessage('ping')
  ping(@MessageBody() data: number) {
    delivered.push(`ping ${data}`)
    return { ok: data }
  }
}

/** The same handlers without the gateway guard: the module's limits do not reach them. */
@WebSocketGateway()
class UnguardedGateway {
  @RateLimit({ limit: LIMIT })
  @SubscribeMessage('chat')
  chat(@MessageBody() data: number) {
    delivered.push(`chat ${data}`)
    return { ok: data }
  }
}

type Platform = 'socket.io' | 'ws'

/** A client's answers: `ok` for each answered message, `refused` for each `rate_limited` it was told. */
interface Client {
  answered: number
  refused: { error: string; reason: string; retryAfter: number }[]
  send(event: string, data: number): void
  /** Leaves without a closing handshake. */
  terminate(): void
}

const apps: INestApplication[] = []
const clients: Client[] = []
afterEach(async () => {
  for (const client of clients.splice(0)) client.terminate()
  await Promise.all(apps.splice(0).map((app) => app.close()))
  delivered.length = 0
  departures = 0
})

/** A store's calls as they happen: how many charged, how many gave back, how many are still running. */
interface Watched {
  store: Store
  consumed: number
  refunded: number
  running: number
}

/** The store itself, its calls counted on the way through (what they do is the store's own). */
function watched(store: Store): Watched {
  const watch: Watched = { store, consumed: 0, refunded: 0, running: 0 }
  watch.store = new Proxy(store, {
    get(target, name) {
      const value = Reflect.get(target, name, target)
      if (typeof value !== 'function') return value
      if (name !== 'consume' && name !== 'refund') return value.bind(target)
      return async (...args: unknown[]) => {
        watch.running++
        try {
          return await value.apply(target, args)
        } finally {
          watch.running--
          if (name === 'consume') watch.consumed++
          else watch.refunded++
        }
      }
    },
  })
  return watch
}

async function start(
  platform: Platform,
  store: Store,
  { guarded = true, ws = {} }: { guarded?: boolean; ws?: RateWindowWsOptions } = {},
): Promise<number> {
  @Module({
    imports: [
      RateWindowModule.forRoot({ limit: 100, window: '1m', store, prefix: uniquePrefix() }),
      RateWindowWsModule.forRoot(ws),
    ],
    providers: [
      guarded ? LimitedGateway : UnguardedGateway,
      { provide: APP_GUARD, useClass: RateWindowGuard },
    ],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
  const app = moduleRef.createNestApplication({ logger: false })
  app.useWebSocketAdapter(platform === 'socket.io' ? new IoAdapter(app) : new WsAdapter(app))
  apps.push(app)
  await app.listen(0, '127.0.0.1')
  return (app.getHttpServer().address() as AddressInfo).port
}

async function connect(platform: Platform, port: number): Promise<Client> {
  const client: Client = { answered: 0, refused: [], send: () => {}, terminate: () => {} }
  if (platform === 'socket.io') {
    const socket = ioClient(`http://127.0.0.1:${port}`, { transports: ['websocket'], reconnection: false })
    // A refused message is answered twice: its acknowledgement carries the refusal, and the `exception` event.
    client.send = (event, data) =>
      socket.emit(event, data, (answer: { ok?: number; error?: string }) => {
        if (answer.error === undefined) client.answered++
      })
    socket.on('exception', (error: Client['refused'][number]) => client.refused.push(error))
    client.terminate = () => socket.io.engine.close()
    await new Promise<void>((resolve) => socket.once('connect', resolve))
  } else {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/`)
    client.send = (event, data) => socket.send(JSON.stringify({ event, data }))
    socket.on('message', (raw) => {
      const message = JSON.parse(String(raw))
      if (message.event === 'exception') client.refused.push(message.data)
      else client.answered++
    })
    socket.on('error', () => {})
    client.terminate = () => socket.terminate()
    await once(socket, 'open')
  }
  clients.push(client)
  return client
}

const STORES: [string, () => Store][] = [
  ['memory', () => new MemoryStore()],
  ['Redis', () => new RedisStore({ client: standaloneClient() })],
]

describe.each(['socket.io', 'ws'] as const)('Nest 12 gateway on %s', (platform) => {
  describe.each(STORES)('on %s', (_, makeStore) => {
    it('a client that floods a limited handler: exactly the limit answered, the rest refused', async () => {
      const client = await connect(platform, await start(platform, makeStore()))
      for (let i = 0; i < 12; i++) client.send('chat', i)
      await until(() => client.answered + client.refused.length === 12, 'every message answered or refused')
      expect(client.answered).toBe(LIMIT)
      expect(delivered).toEqual([0, 1, 2, 3, 4].map((i) => `chat ${i}`))
      expect(client.refused).toHaveLength(12 - LIMIT)
      expect(client.refused[0]).toMatchObject({ error: 'rate_limited', reason: 'limit' })
      expect(client.refused[0]!.retryAfter).toBeGreaterThan(0)
    })

    it('a client that leaves mid-burst holds nothing: the key keeps the limit minus what was delivered', async () => {
      const store = watched(makeStore())
      const port = await start(platform, store.store, { ws: { per: 'key' } })
      const leaving = await connect(platform, port)
      for (let i = 0; i < 3; i++) leaving.send('chat', i)
      leaving.terminate()
      // The leaving client's decisions still in flight when it left are given back when they come in: the next
      // client starts once they have (with Redis, they may come in after it connected).
      await until(
        () => departures === 1 && store.running === 0 && store.consumed - store.refunded === delivered.length,
        'the server saw the client leave, and every charge of its burst was delivered or given back',
      )
      const next = await connect(platform, port)
      for (let i = 0; i < 12; i++) next.send('chat', 100 + i)
      await until(() => next.answered + next.refused.length === 12, 'the second client answered')
      // Whatever the leaving client's handler received counts; nothing else of its burst is held.
      const left = delivered.filter((each) => Number(each.split(' ')[1]) < 100).length
      expect(next.answered).toBe(LIMIT - left)
    })
  })

  it('an exempt handler (@SkipRateLimit) is untouched beside a limited one', async () => {
    const client = await connect(platform, await start(platform, new MemoryStore()))
    for (let i = 0; i < 12; i++) client.send('ping', i)
    await until(() => client.answered === 12, 'every ping answered')
    expect(client.refused).toEqual([])
  })

  it('a gateway without RateWindowWsGuard is untouched, under the global HTTP guard (opt-in)', async () => {
    const client = await connect(platform, await start(platform, new MemoryStore(), { guarded: false }))
    for (let i = 0; i < 12; i++) client.send('chat', i)
    await until(() => client.answered === 12, 'every message answered')
    expect(client.refused).toEqual([])
  })

  it("onLimit: 'close' ends the connection at the limit, its waiting messages settled", async () => {
    const client = await connect(
      platform,
      await start(platform, new MemoryStore(), { ws: { onLimit: 'close' } }),
    )
    for (let i = 0; i < 12; i++) client.send('chat', i)
    await until(
      () => delivered.length === LIMIT && client.refused.length >= (platform === 'ws' ? 0 : 1),
      'the limit',
    )
    expect(delivered).toHaveLength(LIMIT)
  })
})

describe('RateWindowWsModule.forRoot() options', () => {
  it.each([
    ['maxUnreadRefusals', 0],
    ['maxWriteBuffer', -1],
    ['maxBufferedAmount', 1.5],
  ] as const)('%s: %s is refused, naming the option', (name, value) => {
    expect(() => RateWindowWsModule.forRoot({ [name]: value })).toThrow(
      expect.objectContaining({
        code: 'ERR_RATEWINDOW_INVALID_OPTION',
        message: expect.stringContaining(`\`${name}\``),
      }),
    )
  })
})
