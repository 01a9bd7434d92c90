/**
 * `@ratewindow/nestjs/throttler`: the same answers as @nestjs/throttler's own storage for any sequence of calls
 * (memory, Redis and a Redis Cluster, each on a driven clock), and the throttler's own module and guard in real
 * Nest apps on both platforms with our storage in memory and on Redis.
 */
import type { Server } from 'node:http'
import { Controller, Get, Module } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { Test } from '@nestjs/testing'
import { Throttle, ThrottlerGuard, ThrottlerModule, ThrottlerStorageService } from '@nestjs/throttler'
import type { RedisClient } from '@ratewindow/core'
import { ThrottlerStore } from '@ratewindow/nestjs/throttler'
import fc from 'fast-check'
import request from 'supertest'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { clusterClient, standaloneClient } from '../support/redis.js'

let prefixes = 0
const prefix = () => `nest-throttler${process.pid}x${prefixes++}:`

/** A call: which key (each key keeps its ttl, limit and block), after how many ms. */
const call = fc.record({ key: fc.integer({ min: 0, max: 2 }), advance: fc.integer({ min: 0, max: 2_500 }) })
const keyShape = fc.record({
  ttl: fc.constantFrom(1_000, 2_000, 5_000),
  limit: fc.integer({ min: 1, max: 4 }),
  // 0: no block (the refused hit is not kept); otherwise the block lasts this long.
  blockDuration: fc.constantFrom(0, 1_000, 3_000, 5_000),
})

describe.each([
  ['memory', (): RedisClient | undefined => undefined],
  ['Redis', (): RedisClient | undefined => standaloneClient()],
  ['a Redis Cluster', (): RedisClient | undefined => clusterClient()],
] as const)('ThrottlerStore in %s', (_, client) => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it("answers every sequence of calls as @nestjs/throttler's own storage does", async () => {
    const redis = client()
    await fc.assert(
      fc.asyncProperty(
        fc.array(keyShape, { minLength: 3, maxLength: 3 }),
        fc.array(call, { maxLength: 40 }),
        async (shapes, calls) => {
          let now = 1_700_000_000_000
          vi.useFakeTimers({ toFake: ['Date'], now })
          const theirs = new ThrottlerStorageService()
          const ours = new ThrottlerStore({ client: redis, clock: () => now, prefix: prefix() })
          try {
            for (const { key, advance } of calls) {
              now += advance
              vi.setSystemTime(now)
              const { ttl, limit, blockDuration } = shapes[key]!
              const expected = await theirs.increment(`k${key}`, ttl, limit, blockDuration, 'default')
              const actual = await ours.increment(`k${key}`, ttl, limit, blockDuration, 'default')
              // Not blocked, the guard never reads timeToBlockExpire: theirs is then stale or negative, ours 0.
              expect(actual).toEqual(expected.isBlocked ? expected : { ...expected, timeToBlockExpire: 0 })
            }
          } finally {
            theirs.onApplicationShutdown()
            vi.useRealTimers()
          }
        },
      ),
      { numRuns: 100 },
    )
  })

  it('counts concurrent calls for one key exactly (one script call each on Redis)', async () => {
    const store = new ThrottlerStore({ client: client(), prefix: prefix() })
    const records = await Promise.all(
      Array.from({ length: 20 }, () => store.increment('burst', 60_000, 5, 60_000, 'default')),
    )
    expect(records.filter((record) => !record.isBlocked)).toHaveLength(5)
    expect(Math.max(...records.map((record) => record.totalHits))).toBe(6)
  })
})

describe('ThrottlerStore options', () => {
  it('refuses bad options at construction, naming them', () => {
    expect(() => new ThrottlerStore({ client: 'redis://x' as never })).toThrow(/`client`/)
    expect(() => new ThrottlerStore({ maxKeys: 0 })).toThrow(/`maxKeys`/)
    expect(() => new ThrottlerStore({ ttl: 5 } as never)).toThrow(/ttl/)
  })

  it('keeps memory bounded: at most maxKeys keys, the least recently used forgotten first', async () => {
    let now = 0
    const store = new ThrottlerStore({ maxKeys: 2, clock: () => now })
    await store.increment('a', 60_000, 1, 60_000, 'default')
    await store.increment('b', 60_000, 1, 60_000, 'default')
    await store.increment('a', 60_000, 1, 60_000, 'default') // a is blocked, and the most recently used
    await store.increment('c', 60_000, 1, 60_000, 'default') // b goes
    now += 1
    expect((await store.increment('a', 60_000, 1, 60_000, 'default')).isBlocked).toBe(true)
    expect((await store.increment('b', 60_000, 1, 60_000, 'default')).totalHits).toBe(1)
  })
})

@Controller()
class AppController {
  @Get()
  root() {
    return 'ok'
  }

  @Get('strict')
  @Throttle({ default: { limit: 1, ttl: 60_000 } })
  strict() {
    return 'strict'
  }
}

describe.each(['express', 'fastify'] as const)(
  '@nestjs/throttler with ThrottlerStore on Nest 12 %s',
  (platform) => {
    let close: (() => Promise<void>) | undefined
    afterEach(async () => {
      await close?.()
      close = undefined
    })

    it.each([
      ['memory', () => new ThrottlerStore()],
      ['Redis', () => new ThrottlerStore({ client: standaloneClient(), prefix: prefix() })],
    ])('the throttler module and guard as they are, on our storage in %s', async (_, storage) => {
      @Module({
        imports: [ThrottlerModule.forRoot({ throttlers: [{ limit: 2, ttl: 60_000 }], storage: storage() })],
        controllers: [AppController],
        providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
      })
      class AppModule {}
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
      const app = moduleRef.createNestApplication(
        platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter(),
        { logger: false },
      )
      await app.listen(0, '127.0.0.1')
      close = () => app.close()
      const url = `http://127.0.0.1:${((app.getHttpServer() as Server).address() as { port: number }).port}`
      const first = await request(url).get('/').expect(200, 'ok')
      expect(first.headers['x-ratelimit-limit']).toBe('2')
      expect(first.headers['x-ratelimit-remaining']).toBe('1')
      await request(url).get('/').expect(200)
      const refused = await request(url).get('/').expect(429)
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0)
      // @Throttle() on a handler: its own key, its own limit.
      await request(url).get('/strict').expect(200, 'strict')
      await request(url).get('/strict').expect(429)
    })
  },
)
