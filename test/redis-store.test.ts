/**
 * RedisStore cases that do not depend on the client: how it recognises clients, the runner contract, and the
 * server's clock. Each client's own suite (conformance, TTLs, one command per decision, scripts reloaded where
 * missing) is in test/redis-clients/.
 */
import {
  fixedWindow,
  gcra,
  ioredisRunner,
  MemoryStore,
  nodeRedisRunner,
  RateLimitError,
  RateLimiter,
  type RateLimitResult,
  type RedisScriptRunner,
  RedisStore,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { ManualClock } from './support/clock.js'
import { clusterClient, redisEnvironment, standaloneClient } from './support/redis.js'
import { connect, NODE_REDIS_6 } from './support/redis-clients.js'
import { uniquePrefix } from './support/redis-store-suite.js'

describe('RedisStore client recognition', () => {
  it.each([
    ['nothing', undefined],
    ['a URL', 'redis://127.0.0.1:6379'],
    ['a plain object', { get: () => {} }],
    ['an incomplete runner', { family: 'mine', evalSha: () => {} }],
  ])('refuses %s as a client, naming the option and what it accepts', (_, client) => {
    const attempt = () => new RedisStore({ client: client as never })
    expect(attempt).toThrow(RateLimitError)
    expect(attempt).toThrow(/`client` must be an ioredis or iovalkey Redis or Cluster, a node-redis client/)
    try {
      attempt()
    } catch (error) {
      expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'client' })
    }
  })

  it.each([0, -1, '1x', true, Number.POSITIVE_INFINITY])(
    'refuses readyTimeout %s, naming the option',
    (readyTimeout) => {
      const attempt = () =>
        new RedisStore({ client: standaloneClient(), readyTimeout: readyTimeout as never })
      expect(attempt).toThrow(/`readyTimeout` must be/)
    },
  )

  it('an ioredis client with lazyConnect, used before it connects: told to connect, and the decisions wait for it (issue 32)', async () => {
    const client = new Redis({ port: redisEnvironment().standalonePort, lazyConnect: true })
    const errors: unknown[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1h' }),
      prefix: uniquePrefix(),
      store: new RedisStore({ client }),
      onError: (error) => errors.push(error),
    })
    try {
      expect(client.status).toBe('wait')
      const results = await Promise.all([1, 2, 3].map(() => limiter.limit('k')))
      expect(results.map(({ source, allowed }) => ({ source, allowed }))).toEqual([
        { source: 'store', allowed: true },
        { source: 'store', allowed: true },
        { source: 'store', allowed: false },
      ])
      expect(errors).toEqual([])
    } finally {
      client.disconnect()
    }
  })

  it('takes an explicit adapter as well as the bare client', async () => {
    const client = await connect(NODE_REDIS_6, redisEnvironment().standalonePort)
    const rules = fixedWindow({ limit: 2, window: '1h' })
    const prefix = uniquePrefix()
    const bare = new RateLimiter({ rules, prefix, store: new RedisStore({ client }) })
    const adapted = new RateLimiter({
      rules,
      prefix,
      store: new RedisStore({ client: nodeRedisRunner(client as Parameters<typeof nodeRedisRunner>[0]) }),
    })
    expect(await bare.limit('k')).toMatchObject({ source: 'store', remaining: 1 })
    expect(await adapted.limit('k')).toMatchObject({ source: 'store', remaining: 0 })
  })

  it('a node-redis client that was never connected fails the decision, reported, not thrown', async () => {
    const client = createClient({ url: `redis://127.0.0.1:${redisEnvironment().standalonePort}` })
    const errors: unknown[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1h' }),
      store: new RedisStore({ client }),
      onError: (error) => errors.push(error),
    })
    expect(await limiter.limit('k')).toMatchObject({ source: 'policy', allowed: true })
    expect(errors).toHaveLength(1)
  })

  it('runs on a runner of your own: three commands; EVAL the first time a node runs a script, and when it answers NOSCRIPT', async () => {
    const client = standaloneClient()
    const sent: string[] = []
    // Another client's API would do: here ioredis' generic `call`.
    const runner: RedisScriptRunner = {
      family: 'mine',
      cluster: false,
      evalSha: (sha1, keys, args) => {
        sent.push('EVALSHA')
        return client.call('EVALSHA', sha1, keys.length, ...keys, ...args)
      },
      eval: (lua, keys, args) => {
        sent.push('EVAL')
        return client.call('EVAL', lua, keys.length, ...keys, ...args)
      },
      del: (keys) => {
        sent.push('DEL')
        return client.del(...keys)
      },
    }
    const rules = fixedWindow({ limit: 3, window: '1h' })
    const limiter = new RateLimiter({
      rules,
      store: new RedisStore({ client: runner }),
      prefix: uniquePrefix(),
    })
    expect(await limiter.limit('k')).toMatchObject({ source: 'store', remaining: 2 })
    expect(await limiter.limit('k')).toMatchObject({ source: 'store', remaining: 1 })
    // The server loses its scripts (a restart, a failover, SCRIPT FLUSH): NOSCRIPT, then EVAL loads it again.
    await client.script('FLUSH')
    expect(await limiter.limit('k')).toMatchObject({ source: 'store', remaining: 0 })
    await limiter.reset('k')
    expect(await limiter.limit('k')).toMatchObject({ source: 'store', remaining: 2 })
    expect(sent).toEqual(['EVAL', 'EVALSHA', 'EVALSHA', 'EVAL', 'DEL', 'EVALSHA'])
  })

  it('a script error other than NOSCRIPT is not retried', async () => {
    // A user allowed EVAL but not EVALSHA: the server refuses the script with NOPERM, and the store must not
    // fall back to EVAL (only NOSCRIPT says the script did not run for want of it).
    const { standalonePort: port } = redisEnvironment()
    await standaloneClient().acl('SETUSER', 'no-evalsha', 'on', '>secret', '~*', '+@all', '-evalsha')
    const client = new Redis({ host: '127.0.0.1', port, username: 'no-evalsha', password: 'secret' })
    const adapter = ioredisRunner(client)
    const sent: string[] = []
    const runner: RedisScriptRunner = {
      ...adapter,
      evalSha: (...args) => {
        sent.push('EVALSHA')
        return adapter.evalSha(...args)
      },
      eval: (...args) => {
        sent.push('EVAL')
        return adapter.eval(...args)
      },
    }
    const store = new RedisStore({ client: runner })
    const request = {
      prefix: uniquePrefix(),
      key: 'k',
      rules: [fixedWindow({ limit: 3, window: '1h' })],
      cost: 1,
    }
    try {
      // The first call loads the script (EVAL, allowed); the next is an EVALSHA, refused, and not sent again.
      await store.consume(request)
      await expect(store.consume(request)).rejects.toThrow(/NOPERM/)
      expect(sent).toEqual(['EVAL', 'EVALSHA'])
    } finally {
      client.disconnect()
    }
  })
})

describe('Redis server time', () => {
  afterAll(() => {
    vi.useRealTimers()
  })

  it('two limiters whose process clocks differ by 14 minutes make the same decisions', async () => {
    const rule = fixedWindow({ limit: 3, window: '1m' })
    const prefix = uniquePrefix()
    const ahead = new RateLimiter({
      rules: rule,
      prefix,
      store: new RedisStore({ client: standaloneClient() }),
    })
    const behind = new RateLimiter({
      rules: rule,
      prefix,
      store: new RedisStore({ client: standaloneClient() }),
    })
    const [seconds] = await standaloneClient().time()
    const serverNow = Number(seconds) * 1000
    vi.useFakeTimers({ toFake: ['Date'] })
    const decisions: boolean[] = []
    const times: number[] = []
    for (const [limiter, offset] of [
      [ahead, 7],
      [behind, -7],
      [ahead, 7],
      [behind, -7],
    ] as const) {
      vi.setSystemTime(serverNow + offset * 60_000)
      const result = await limiter.limit('shared')
      decisions.push(result.allowed)
      times.push(result.at)
    }
    vi.useRealTimers()
    // One shared minute window: three admitted, the fourth denied, whatever the process clocks say.
    expect(decisions).toEqual([true, true, true, false])
    for (const at of times) expect(Math.abs(at - serverNow)).toBeLessThan(5_000)
  })

  it('with client clocks the same skew splits the window: why server time is the default', async () => {
    const rule = fixedWindow({ limit: 1, window: '1m' })
    const prefix = uniquePrefix()
    const client = standaloneClient()
    const now = 1_700_000_000_000
    const ahead = new RateLimiter({
      rules: rule,
      prefix,
      store: new RedisStore({ client, clock: () => now + 420_000 }),
    })
    const behind = new RateLimiter({
      rules: rule,
      prefix,
      store: new RedisStore({ client, clock: () => now - 420_000 }),
    })
    // The lagging clock first: a window never steps back, so the other order would share the newer window.
    expect((await behind.limit('shared')).allowed).toBe(true)
    expect((await ahead.limit('shared')).allowed).toBe(true) // a different window: the limit is doubled
  })
})

describe('The decision script', () => {
  it.each([
    ['standalone', () => standaloneClient()],
    ['Cluster', () => clusterClient()],
  ] as const)(
    'on %s, 14 rules of every algorithm (past the 10 kept in Lua locals) decide like the memory store',
    async (_, makeClient) => {
      const makers: ((i: number) => Rule)[] = [
        (i) => slidingWindowCounter({ limit: 5 + i, window: 10_000 + i }),
        (i) => fixedWindow({ limit: 6 + i, window: 20_000 + i }),
        (i) => tokenBucket({ capacity: 4 + i, refillRate: 1, interval: 1_000 + i }),
        (i) => gcra({ limit: 3 + i, window: 5_000 + i, burst: 5 + i }),
        (i) => slidingWindowLog({ limit: 7 + i, window: 15_000 + i }),
      ]
      const rules = Array.from({ length: 14 }, (_, i) => makers[i % makers.length]!(i))
      const clock = new ManualClock(1_700_000_000_000)
      const prefix = uniquePrefix()
      const redis = new RateLimiter({
        rules,
        prefix,
        store: new RedisStore({ client: makeClient(), clock: clock.read }),
      })
      const memory = new RateLimiter({ rules, prefix, store: new MemoryStore({ clock: clock.read }) })
      const view = ({ allowed, remaining, reset, retryAfter }: RateLimitResult) => ({
        allowed,
        remaining,
        reset,
        retryAfter,
      })
      const admitted: boolean[] = []
      for (let i = 0; i < 40; i++) {
        const cost = 1 + (i % 3)
        const fromRedis = await redis.limit('k', { cost })
        const fromMemory = await memory.limit('k', { cost })
        expect(view(fromRedis)).toEqual(view(fromMemory))
        admitted.push(fromRedis.allowed)
        if (i % 7 === 3) {
          await redis.refund(fromRedis)
          await memory.refund(fromMemory)
        }
        expect(view(await redis.peek('k'))).toEqual(view(await memory.peek('k')))
        clock.advance(137 * (i % 5))
      }
      // Both outcomes occurred, so the comparison covered admitted and denied requests.
      expect(new Set(admitted)).toEqual(new Set([true, false]))
    },
  )
})
