/**
 * Issue 47, item 1: plans on Redis. The conformance suite's plans section runs on MemoryStore and RedisStore with
 * every client on one server and a Cluster (memory-store.test.ts, redis-clients/); here, the same section on
 * SyncedStore, and what only Redis shows: the plan recorded beside the key's state (written only when it differs or
 * half its lifetime has passed), the state a limiter of `rules` left read by the same rules as a first plan, and
 * concurrent decisions of several plans grouped into scripts, exact per plan.
 */
import { fixedWindow, gcra, RateLimiter, RedisStore, SyncedStore } from '@ratewindow/core'
import { describePlanConformance } from '@ratewindow/testing'
import { describe, expect, it } from 'vitest'
import { ManualClock } from './support/clock.js'
import { clusterClient, standaloneClient, uniquePrefix } from './support/redis.js'

describePlanConformance(
  { describe, it, expect },
  {
    name: 'SyncedStore',
    createStore: (clock) =>
      new SyncedStore({ client: standaloneClient(), clock: clock.read, interval: '1h' }),
  },
)

const plans = () => ({
  free: [
    fixedWindow({ limit: 3, window: '1m', name: 'per-minute' }),
    gcra({ limit: 10, window: '1h', name: 'hourly' }),
  ],
  pro: [
    fixedWindow({ limit: 6, window: '1m', name: 'per-minute' }),
    gcra({ limit: 100, window: '1h', name: 'hourly' }),
  ],
})

describe('plans on RedisStore', () => {
  it('record the plan beside the key, rewritten only when it changes or half its lifetime has passed', async () => {
    const client = standaloneClient()
    const clock = new ManualClock(Date.parse('2026-05-01T00:00:00Z'))
    const prefix = uniquePrefix()
    const limiter = new RateLimiter({
      plans: plans(),
      store: new RedisStore({ client, clock: clock.read }),
      prefix,
    })
    const recorded = async () => {
      const [key] = await client.keys(`${prefix}*:plan`)
      return key === undefined ? undefined : { value: await client.get(key), ttl: await client.pttl(key) }
    }
    await limiter.limit('acme', { plan: 'pro' })
    // Twice the longest rule's window (GCRA's 1h of 100 at a burst of 100): 2 hours.
    const first = await recorded()
    expect(first).toEqual({
      value: `${clock.now + 2 * 3_600_000}|{"name":"pro","rules":{"per-minute":{"limit":6},"hourly":{"limit":100,"burst":100}}}`,
      ttl: expect.any(Number),
    })
    clock.advance(30 * 60_000)
    await limiter.limit('acme', { plan: 'pro' })
    expect((await recorded())!.value).toBe(first!.value)
    // A peek, with or without a plan, writes nothing.
    await limiter.peek('acme', { plan: 'free' })
    expect((await recorded())!.value).toBe(first!.value)
    clock.advance(31 * 60_000)
    await limiter.limit('acme', { plan: 'pro' })
    expect((await recorded())!.value).toBe(
      `${clock.now + 2 * 3_600_000}|{"name":"pro","rules":{"per-minute":{"limit":6},"hourly":{"limit":100,"burst":100}}}`,
    )
    await limiter.limit('acme', { plan: 'free' })
    expect((await recorded())!.value).toBe(`${clock.now + 2 * 3_600_000}|{"name":"free"}`)
  })

  it("read the state a limiter of the first plan's rules left (the namespace is the same)", async () => {
    const client = standaloneClient()
    const prefix = uniquePrefix()
    const store = new RedisStore({ client })
    const before = new RateLimiter({ rules: plans().free, store, prefix })
    for (let i = 0; i < 2; i++) await before.limit('acme')
    before.release()
    const after = new RateLimiter({ plans: plans(), store, prefix })
    expect(after.namespace).toBe(before.namespace)
    expect(await after.limit('acme', { plan: 'free' })).toMatchObject({
      allowed: true,
      remaining: 0,
      plan: 'free',
    })
    expect(await after.limit('acme', { plan: 'pro' })).toMatchObject({
      allowed: true,
      remaining: 2,
      plan: 'pro',
    })
  })

  it.each([
    ['one server', standaloneClient],
    ['the Cluster', clusterClient],
  ])(
    "admit exactly each plan's limit under concurrent decisions grouped into scripts (%s)",
    async (_, connect) => {
      const store = new RedisStore({ client: connect() })
      const limiter = new RateLimiter({ plans: plans(), store, prefix: uniquePrefix(), timeout: '10s' })
      const keys = Array.from({ length: 20 }, (_, i) => `customer:${i}`)
      const results = await Promise.all(
        keys.flatMap((key, i) =>
          Array.from({ length: 30 }, () => limiter.limit(key, { plan: i % 2 === 0 ? 'pro' : 'free' })),
        ),
      )
      const admitted = new Map<string, number>()
      for (const result of results)
        if (result.allowed) admitted.set(result.key, (admitted.get(result.key) ?? 0) + 1)
      expect(keys.map((key) => admitted.get(key))).toEqual(keys.map((_, i) => (i % 2 === 0 ? 6 : 3)))
      const top = await limiter.operator.top({ count: 40, scan: 1_000_000 })
      // Every key at its own plan's limit (the keys show hashed: no override record holds them raw).
      expect(top.keys.map(({ plan, used, limit }) => `${plan} ${used}/${limit}`).sort()).toEqual([
        ...Array<string>(10).fill('free 3/3'),
        ...Array<string>(10).fill('pro 6/6'),
      ])
    },
  )
})
