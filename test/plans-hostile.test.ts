/**
 * Issue 47: attacks on plans, as the attackers wrote them (the outside rounds' findings are added here as found).
 * A client whose plan flaps between requests, concurrent requests naming different plans, a plan key another
 * application wrote under the same prefix, and hostile answers of a `plan` function: none gets past the key's limit,
 * none crashes the server, and the operator tools never show a plan the store did not record.
 */
import {
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimiter,
  RedisStore,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { describe, expect, it } from 'vitest'
import { ManualClock } from './support/clock.js'
import { standaloneClient, uniquePrefix } from './support/redis.js'

const plans = () => ({
  free: [
    fixedWindow({ limit: 5, window: '1h', name: 'hourly' }),
    gcra({ limit: 10, window: '1h', name: 'rate' }),
  ],
  pro: [
    fixedWindow({ limit: 20, window: '1h', name: 'hourly' }),
    gcra({ limit: 40, window: '1h', name: 'rate' }),
  ],
})

describe('plans under attack (RedisStore)', () => {
  it('a key flapping between plans on concurrent requests gets no more than the larger plan allows', async () => {
    const limiter = new RateLimiter({
      plans: plans(),
      store: new RedisStore({ client: standaloneClient() }),
      prefix: uniquePrefix(),
      timeout: '10s',
    })
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => limiter.limit('flapper', { plan: i % 2 === 0 ? 'free' : 'pro' })),
    )
    const admitted = results.filter((result) => result.allowed)
    // Every admission stays within the limits of the plan it was made under: the free plan's admit up to 5 used.
    expect(admitted.length).toBeLessThanOrEqual(20)
    for (const result of admitted)
      expect(result.rules[0]!.rule.limit - result.rules[0]!.remaining).toBeLessThanOrEqual(
        result.rules[0]!.rule.limit,
      )
    expect(admitted.filter((result) => result.plan === 'free').length).toBeLessThanOrEqual(5)
  })

  it('a plan key another application wrote never lends its limits to a read, and the next decision writes its own', async () => {
    const client = standaloneClient()
    const prefix = uniquePrefix()
    const limiter = new RateLimiter({
      plans: plans(),
      store: new RedisStore({ client }),
      prefix,
      timeout: '10s',
    })
    await limiter.limit('victim', { plan: 'free' })
    const [key] = await client.keys(`${prefix}*:plan`)
    // Outside round 1 (F3): another writer under the prefix recorded a plan of its own, with limits of its own.
    const tampered: [string, string | undefined, number[]][] = [
      [
        `9999999999999|${JSON.stringify({ name: 'ent\u001b]0;PWNED\u0007\u001b[2J', rules: { hourly: { limit: 1_000_000 } } })}`,
        undefined,
        [5, 10],
      ],
      [
        '9999999999999|{"name":"pro","rules":{"hourly":{"limit":1000000},"rate":{"limit":-4,"burst":"x"}}}',
        'pro',
        [20, 40],
      ],
      ['9999999999999|{"name":"__proto__"}', undefined, [5, 10]],
      ['garbage', undefined, [5, 10]],
      ['1|{"name":', undefined, [5, 10]],
    ]
    for (const [value, plan, limits] of tampered) {
      await client.set(key!, value)
      // A read shows a recorded name only when it is one of the plans, with that plan's limits from the code.
      const inspection = await limiter.operator.inspect('victim')
      expect(inspection.plan).toBe(plan)
      expect(inspection.rules.map((rule) => rule.limit)).toEqual(limits)
      const [row] = (await limiter.operator.top({ scan: 1_000_000 })).keys
      expect([row?.plan, row?.limit]).toEqual([plan, limits[0]])
      // A decision applies the plan it is given, whatever is stored, and records it.
      const decided = await limiter.limit('victim', { plan: 'free' })
      expect(decided).toMatchObject({ plan: 'free', limit: 5 })
      expect(await client.get(key!)).toMatch(/^\d+\|\{"name":"free"\}$/)
    }
    // A key of another type: the decision replaces it.
    await client.del(key!)
    await client.hset(key!, 'a', '1')
    expect(await limiter.limit('victim', { plan: 'pro' })).toMatchObject({ allowed: true, plan: 'pro' })
    expect(await client.type(key!)).toBe('string')
  })

  it("a plan function's hostile answers are the application's error, counted under no plan", async () => {
    const limiter = new RateLimiter({
      plans: plans(),
      store: new RedisStore({ client: standaloneClient() }),
      prefix: uniquePrefix(),
      timeout: '10s',
    })
    for (const hostile of ['__proto__', 'constructor', 'x'.repeat(1_000_000), 'free ', 'FREE']) {
      await expect(limiter.limit('k', { plan: hostile })).rejects.toMatchObject({
        code: 'ERR_RATEWINDOW_UNKNOWN_PLAN',
      })
    }
    for (const hostile of [42, null, {}, ['free']]) {
      await expect(limiter.limit('k', { plan: hostile as never })).rejects.toMatchObject({
        code: 'ERR_RATEWINDOW_UNKNOWN_PLAN',
      })
    }
    // Nothing was counted.
    expect((await limiter.operator.inspect('k')).rules.map((rule) => rule.used)).toEqual([0, 0])
  })

  it("a downgrade after a day of pro's million does not lock the key out for a thousand days (round 1, F1)", async () => {
    const clock = new ManualClock(Date.parse('2026-06-01T00:00:00Z'))
    const daily = {
      free: fixedWindow({ limit: 1_000, window: '1d', name: 'daily' }),
      pro: fixedWindow({ limit: 1_000_000, window: '1d', name: 'daily' }),
    }
    for (const store of [
      new RedisStore({ client: standaloneClient(), clock: clock.read }),
      new MemoryStore({ clock: clock.read }),
    ]) {
      clock.set(Date.parse('2026-06-01T00:00:00Z'))
      const limiter = new RateLimiter({ plans: daily, store, prefix: uniquePrefix(), timeout: '10s' })
      for (let i = 0; i < 1_000; i++) await limiter.limit('k', { plan: 'pro', cost: 1_000 })
      const down = await limiter.limit('k', { plan: 'free' })
      expect(down).toMatchObject({ allowed: false, retryAfter: 86_400_000 })
      clock.set(Date.parse('2026-06-02T00:00:01Z'))
      expect(await limiter.limit('k', { plan: 'free' })).toMatchObject({ allowed: true, remaining: 999 })
    }
  })

  it.each([
    ['fixed window', (limit: number) => fixedWindow({ limit, window: '1m', name: 'r' })],
    ['GCRA', (limit: number) => gcra({ limit, window: '1m', name: 'r' })],
    [
      'token bucket',
      (limit: number) => tokenBucket({ capacity: limit, refillRate: limit, interval: '1m', name: 'r' }),
    ],
  ])(
    "round 2 (H1): one free request, then pro until refused, 20 times in one window gets pro's 100 in all (%s)",
    async (_, make) => {
      const clock = new ManualClock(Date.parse('2026-06-01T00:00:00Z'))
      for (const store of [
        new RedisStore({ client: standaloneClient(), clock: clock.read }),
        new MemoryStore({ clock: clock.read }),
      ]) {
        const limiter = new RateLimiter({
          plans: { free: make(10), pro: make(100) },
          store,
          prefix: uniquePrefix(),
          timeout: '10s',
        })
        let admitted = 0
        for (let round = 0; round < 20; round++) {
          if ((await limiter.limit('k', { plan: 'free' })).allowed) admitted++
          for (let i = 0; i < 200; i++) {
            if (!(await limiter.limit('k', { plan: 'pro' })).allowed) break
            admitted++
          }
        }
        expect(admitted).toBe(100)
        expect((await limiter.usage('k')).rules[0]).toMatchObject({ used: 100, limit: 100 })
      }
    },
  )

  it('round 3 (1, 2): a cost above a lowered override on a sliding window log is refused on Redis, and its group decides', async () => {
    const client = standaloneClient()
    const store = new RedisStore({ client })
    const log = new RateLimiter({
      rules: slidingWindowLog({ limit: 10, window: '1m', name: 'log' }),
      store,
      prefix: uniquePrefix(),
      overrides: true,
      timeout: '10s',
      onStoreError: 'allow',
    })
    await log.operator.set('abuser', { limit: 4 })
    // The script failed on `cost` 5 (an entry read past the log's end), and the failure policy admitted all 50.
    const abuser = await Promise.all(Array.from({ length: 50 }, () => log.limit('abuser', { cost: 5 })))
    expect(abuser.filter((result) => result.allowed).length).toBe(0)
    expect(abuser[0]).toMatchObject({ source: 'store', remaining: 4, retryAfter: 60_000 })
    // Victims decided in the same groups as the abuser's calls: each held to its limit.
    const calls = [
      ...Array.from({ length: 20 }, (_, key) =>
        Array.from({ length: 15 }, () => log.limit(`victim:${key}`)),
      ).flat(),
      ...Array.from({ length: 20 }, () => log.limit('abuser', { cost: 5 })),
    ]
    const results = await Promise.all(calls)
    expect(results.filter((result) => result.source === 'policy').length).toBe(0)
    for (let key = 0; key < 20; key++)
      expect(results.filter((result) => result.key === `victim:${key}` && result.allowed).length).toBe(10)
  })
})
