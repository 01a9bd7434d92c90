import {
  fixedWindow,
  gcra,
  RateLimiter,
  RedisStore,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import type { Cluster, Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { clusterClient, standaloneClient } from './support/redis.js'

type Client = Redis | Cluster
/** Ways to leave a key in a shape its algorithm cannot read, each without a TTL. */
const BREAKERS: [string, (client: Client, key: string) => Promise<unknown>][] = [
  ['a list', (client, key) => client.rpush(key, 'x')],
  ['a string of garbage', (client, key) => client.set(key, 'garbage')],
  ['a hash of garbage', (client, key) => client.hset(key, 'w', 'abc', 'c', '1')],
  ['a sorted set', (client, key) => client.zadd(key, 1, 'x')],
]
const RULES: [string, () => Rule][] = [
  ['fixed-window', () => fixedWindow({ limit: 3, window: '1h' })],
  ['sliding-window-log', () => slidingWindowLog({ limit: 3, window: '1h' })],
  ['sliding-window-counter', () => slidingWindowCounter({ limit: 3, window: '1h' })],
  ['token-bucket', () => tokenBucket({ capacity: 3, refillRate: 1, interval: '1h' })],
  ['gcra', () => gcra({ limit: 1, window: '1h', burst: 3 })],
]
/** Shapes that are an algorithm's own type (a sorted set with any members is a valid log). */
const READABLE: Record<string, string[]> = {
  'sliding-window-log': ['a sorted set'],
}
let prefixes = 0

describe.each([
  ['standalone', () => standaloneClient()],
  ['Cluster', () => clusterClient()],
] as const)('RedisStore on %s: a key in the wrong shape is repaired, not fatal', (topology, makeClient) => {
  for (const [algorithm, make] of RULES) {
    for (const [shape, breakKey] of BREAKERS) {
      if (READABLE[algorithm]?.includes(shape)) continue
      it(`${algorithm} over ${shape}: rewritten from a fresh state, reported once, exact limits after`, async () => {
        const client = makeClient()
        const store = new RedisStore({ client })
        const rule = make()
        const prefix = `rp${process.pid}x${prefixes++}x`
        const errors: unknown[] = []
        const limiter = new RateLimiter({
          rules: [rule, fixedWindow({ limit: 100, window: '2h' })],
          store,
          prefix,
          onError: (error) => errors.push(error),
        })
        const key = store.keyFor(limiter.namespace, 'victim', rule)
        await breakKey(client, key)
        const results = []
        for (let i = 0; i < 5; i++) results.push(await limiter.limit('victim'))
        // Exact: the store decided every request (never the failure policy), three admitted from fresh.
        expect(results.map((result) => result.source)).toEqual(Array(5).fill('store'))
        expect(results.map((result) => result.allowed)).toEqual([true, true, true, false, false])
        expect(errors).toHaveLength(1)
        expect(errors[0]).toMatchObject({
          code: 'ERR_RATEWINDOW_STORE',
          message: expect.stringContaining('Repaired'),
        })
        expect(await client.pttl(key)).toBeGreaterThan(0)
        // Other clients are untouched.
        expect((await limiter.limit('bystander')).allowed).toBe(true)
        expect(errors).toHaveLength(1)
      })
    }
  }

  it('peek and refund repair too, and a key without a TTL gets one and is reported', async () => {
    const client = makeClient()
    const store = new RedisStore({ client })
    const rule = fixedWindow({ limit: 2, window: '1h' })
    const prefix = `rp${process.pid}x${prefixes++}x`
    const errors: { operation: string }[] = []
    const limiter = new RateLimiter({
      rules: rule,
      store,
      prefix,
      onError: (_, context) => errors.push(context),
    })
    const key = store.keyFor(limiter.namespace, 'p', rule)
    await client.rpush(key, 'x')
    expect(await limiter.peek('p')).toMatchObject({ allowed: true, remaining: 2, source: 'store' })
    expect(await client.exists(key)).toBe(0)
    const admitted = await limiter.limit('p')
    await client.del(key)
    await client.rpush(key, 'x')
    await limiter.refund(admitted)
    expect(await client.type(key)).not.toBe('list')
    const window = Math.floor(Date.now() / 3_600_000)
    await client.set(key, `${window}:2`) // full, no TTL: denied until the window ends, not forever
    expect((await limiter.limit('p')).allowed).toBe(false)
    expect(await client.pttl(key)).toBeGreaterThan(0)
    expect(errors.map((error) => error.operation)).toEqual(['peek', 'refund', 'consume'])
  })
  it('a sliding window counter in the hash that 0.1 wrote is read, counted on and rewritten, no notice', async () => {
    const client = makeClient()
    const store = new RedisStore({ client })
    const rule = slidingWindowCounter({ limit: 3, window: '1h' })
    const prefix = `rp${process.pid}x${prefixes++}x`
    const errors: unknown[] = []
    const limiter = new RateLimiter({ rules: rule, store, prefix, onError: (error) => errors.push(error) })
    const window = Math.floor(Date.now() / 3_600_000)
    const admitted = store.keyFor(limiter.namespace, 'admitted', rule)
    const peeked = store.keyFor(limiter.namespace, 'peeked', rule)
    for (const key of [admitted, peeked]) {
      await client.hset(key, 'w', String(window), 'c', '2', 'p', '0')
      await client.pexpire(key, 3_600_000)
    }
    expect(await limiter.limit('admitted')).toMatchObject({ allowed: true, remaining: 0, source: 'store' })
    expect((await limiter.limit('admitted')).allowed).toBe(false)
    expect(await limiter.peek('peeked')).toMatchObject({ allowed: true, remaining: 1, source: 'store' })
    for (const key of [admitted, peeked]) {
      expect(await client.type(key)).toBe('string')
      expect(await client.pttl(key)).toBeGreaterThan(0)
    }
    expect((await limiter.limit('peeked')).allowed).toBe(true)
    expect((await limiter.limit('peeked')).allowed).toBe(false)
    expect(errors).toEqual([])
  })

  // Standalone: on a Cluster each client's keys have a slot of their own (hashed), so no call holds several.
  it.skipIf(topology === 'Cluster')(
    'in a group of several clients (one MGET ahead, issue 33), the hash that 0.1 wrote is still read, not reset',
    async () => {
      const client = makeClient()
      const store = new RedisStore({ client })
      const rule = slidingWindowCounter({ limit: 3, window: '1h' })
      const limiter = new RateLimiter({ rules: rule, store, prefix: `rp${process.pid}x${prefixes++}x` })
      const window = Math.floor(Date.now() / 3_600_000)
      for (const name of ['old-a', 'old-b']) {
        const stored = store.keyFor(limiter.namespace, name, rule)
        await client.hset(stored, 'w', String(window), 'c', '2', 'p', '0')
        await client.pexpire(stored, 3_600_000)
      }
      await limiter.limit('fresh')
      const before = { ...store.groupStats }
      // The first goes alone; the other four wait for the end of the turn and go as one script call.
      const results = await Promise.all(
        ['warm', 'old-a', 'old-b', 'fresh', 'old-a'].map((name) => limiter.limit(name)),
      )
      expect(store.groupStats.entries - before.entries).toBe(5)
      expect(store.groupStats.calls - before.calls).toBe(2)
      expect(results.map(({ allowed, remaining }) => [allowed, remaining])).toEqual([
        [true, 2],
        [true, 0],
        [true, 0],
        [true, 1],
        [false, 0],
      ])
      expect(await client.type(store.keyFor(limiter.namespace, 'old-b', rule))).toBe('string')
    },
  )

  it('a sliding window counter made TTL-less from outside (PERSIST) gets its TTL back on a read, or in a later window', async () => {
    const client = makeClient()
    const store = new RedisStore({ client })
    const rule = slidingWindowCounter({ limit: 3, window: '1h' })
    const prefix = `rp${process.pid}x${prefixes++}x`
    const errors: unknown[] = []
    const limiter = new RateLimiter({ rules: rule, store, prefix, onError: (error) => errors.push(error) })
    const key = store.keyFor(limiter.namespace, 'p', rule)
    await limiter.limit('p')
    await client.persist(key)
    // Within its window an admitted request keeps the key's TTL as it is (SET … KEEPTTL, see docs/redis.md):
    // here none, until a request that writes nothing or the next window.
    await limiter.limit('p')
    expect(await client.pttl(key)).toBe(-1)
    expect(await limiter.peek('p')).toMatchObject({ allowed: true, remaining: 1, source: 'store' })
    expect(await client.pttl(key)).toBeGreaterThan(0)
    expect(errors).toHaveLength(1)
    // A key of an earlier window (written by hand: 24 bytes, three little-endian doubles, 1 request counted) is
    // written with its TTL by the next admitted request, silently, as every algorithm's write does.
    const state = Buffer.alloc(24)
    state.writeDoubleLE(Math.floor(Date.now() / 3_600_000) - 1, 0)
    state.writeDoubleLE(1, 8)
    await client.set(key, state)
    expect(await limiter.limit('p')).toMatchObject({ allowed: true, source: 'store' })
    expect(await client.pttl(key)).toBeGreaterThan(0)
    expect(errors).toHaveLength(1)
  })
})
