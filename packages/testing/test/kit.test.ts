import {
  fixedWindow,
  type HeaderFormat,
  MemoryStore,
  RateLimiter,
  RedisStore,
  type Store,
  slidingWindowCounter,
} from '@ratewindow/core'
import { rateLimit } from '@ratewindow/express'
import express from 'express'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { redisEnvironment } from '../../../test/support/redis.js'
import {
  describeStoreConformance,
  expectAllowed,
  expectLimited,
  expectNoRateLimit,
  RateLimitAssertionError,
  readRateLimit,
  TestClock,
  testPrefix,
  wipeRedisPrefix,
  workerId,
} from '../src/index.js'

function app(options: Parameters<typeof rateLimit>[0]) {
  const server = express()
  server.use(rateLimit(options))
  server.get('/', (_request, response) => {
    response.send('ok')
  })
  return server
}

describe('TestClock', () => {
  it('drives a memory store, the circuit breaker and durations as options spell them', async () => {
    const clock = new TestClock(new Date('2026-01-01T00:00:00Z'))
    expect(clock.now).toBe(Date.UTC(2026, 0, 1))
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      store: clock.memoryStore(),
      circuitBreaker: clock.circuitBreaker({ failures: 1 }),
    })
    expect((await limiter.limit('k')).allowed).toBe(true)
    expect((await limiter.limit('k')).allowed).toBe(false)
    clock.advance('59s')
    expect((await limiter.limit('k')).allowed).toBe(false)
    clock.advance(1_000)
    expect((await limiter.limit('k')).allowed).toBe(true)
    clock.advance(-5)
    expect(clock.now).toBe(Date.UTC(2026, 0, 1) + 60_000 - 5)
    expect(() => clock.set(Number.NaN)).toThrow(/epoch milliseconds/)
  })
})

describe('header helpers', () => {
  it.each(['draft-6', 'draft-7', 'draft-8', 'draft-11'] as HeaderFormat[])(
    'read %s headers as the middleware writes them',
    async (headers) => {
      // A driven clock at the start of a minute: a fixed window's denial waits exactly 60 s.
      const store = new TestClock(1_700_000_040_000).memoryStore()
      const server = app({ limit: 2, window: '1m', algorithm: 'fixed-window', headers, store })
      const first = await request(server).get('/')
      expect(expectAllowed(first, { limit: 2, remaining: 1 })).toMatchObject({
        format: headers === 'draft-11' ? 'draft-8' : headers,
      })
      await request(server).get('/')
      const denied = await request(server).get('/')
      expectLimited(denied, { remaining: 0, retryAfter: 60 })
      const read = readRateLimit(denied)
      expect(read.policies[0]).toMatchObject({ limit: 2, window: 60 })
    },
  )

  it('read legacy headers, fetch Headers, and Fastify-style statusCode', () => {
    expect(readRateLimit({ 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '3' })).toMatchObject({
      format: 'legacy',
      limit: 5,
      remaining: 3,
    })
    const headers = new Headers({ 'RateLimit-Limit': '5', 'RateLimit-Remaining': '0', 'Retry-After': '7' })
    expect(expectLimited({ headers, statusCode: 429 }, { retryAfter: 7 }).limit).toBe(5)
  })

  it('fail with a message that says what the response holds', async () => {
    const server = app({ limit: 1, window: '1m', store: new MemoryStore() })
    const allowed = await request(server).get('/')
    expect(() => expectAllowed(allowed, { remaining: 3 })).toThrow(
      /Expected rate limit remaining 3, the response says 0/,
    )
    expect(() => expectLimited(allowed)).toThrow(RateLimitAssertionError)
    expect(() => expectNoRateLimit(allowed)).toThrow(/draft-6/)
    const off = await request(app({ enabled: false })).get('/')
    expectNoRateLimit(off)
    expect(() => expectAllowed(off)).toThrow(/has none/)
  })
})

describe('counters of their own', () => {
  it('testPrefix differs per call and names the worker', () => {
    const a = testPrefix('api')
    const b = testPrefix('api')
    expect(a).not.toBe(b)
    expect(a.startsWith(`api:w${workerId()}:`)).toBe(true)
    expect(() => testPrefix('a b')).toThrow(TypeError)
  })

  it('MemoryStore.clear() gives the next test fresh counters', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1h' }), store })
    await limiter.limit('k')
    expect((await limiter.limit('k')).allowed).toBe(false)
    store.clear()
    expect((await limiter.limit('k')).allowed).toBe(true)
  })

  it.each([
    [
      'ioredis',
      async () => {
        const client = new Redis({ port: redisEnvironment().standalonePort, lazyConnect: true })
        await client.connect()
        return { client, close: () => client.quit() }
      },
    ],
    [
      'node-redis',
      async () => {
        const client = createClient({
          socket: { port: redisEnvironment().standalonePort, host: '127.0.0.1' },
        })
        await client.connect()
        return { client, close: () => client.quit() }
      },
    ],
  ] as const)("wipeRedisPrefix deletes a prefix's counters and nothing else (%s)", async (_, connect) => {
    const { client, close } = await connect()
    try {
      const prefix = testPrefix('wipe')
      const other = testPrefix('wipe')
      const rules = slidingWindowCounter({ limit: 1, window: '1h' })
      const mine = new RateLimiter({ rules, store: new RedisStore({ client, prefix }) })
      const theirs = new RateLimiter({ rules, store: new RedisStore({ client, prefix: other }) })
      for (const limiter of [mine, theirs]) for (const key of ['a', 'b']) await limiter.limit(key)
      expect((await mine.limit('a')).allowed).toBe(false)
      expect(await wipeRedisPrefix(client, prefix)).toBe(2)
      expect((await mine.limit('a')).allowed).toBe(true)
      expect((await theirs.limit('a')).allowed).toBe(false)
      await expect(wipeRedisPrefix(client, 'rw*')).rejects.toThrow(/glob/)
    } finally {
      await close()
    }
  })
})

/** A store as a third party writes one: here a wrapper over MemoryStore, as a Postgres store would wrap a table. */
class ThirdPartyStore implements Store {
  readonly penalties = true
  readonly #inner: MemoryStore
  constructor(clock: () => number) {
    this.#inner = new MemoryStore({ clock })
  }
  consume: Store['consume'] = (request) => Promise.resolve(this.#inner.consume(request))
  peek: Store['peek'] = (request) => Promise.resolve(this.#inner.peek(request))
  refund: Store['refund'] = (request) => Promise.resolve(this.#inner.refund(request))
  reset: Store['reset'] = (target) => Promise.resolve(this.#inner.reset(target))
  charge: NonNullable<Store['charge']> = (request) => Promise.resolve(this.#inner.charge(request))
}

describeStoreConformance(
  { describe, it, expect },
  { name: 'a third-party store', createStore: (clock) => new ThirdPartyStore(clock.read), numRuns: 20 },
)
