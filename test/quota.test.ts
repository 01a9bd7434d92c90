/**
 * Issue 47, item 3: quota rules on the calendar, decided the same by MemoryStore (the rule's own periods, in
 * JavaScript) and by RedisStore on one server and on a Cluster (the script, given the bounds the deciding process
 * computed), and by SyncedStore (through that RedisStore), each on its store's clock driven through a month's end, a short February, a billing anchor on the 31st
 * and the change to summer time in Europe/Paris; combined with a rate rule in one atomic decision; a settle's debt
 * carried into the next period; an override of the quota's limit; a stored period end adopted as it is.
 */
import {
  fixedWindow,
  MemoryStore,
  quota,
  RateLimiter,
  type RateLimiterOptions,
  type RateLimitResult,
  RedisStore,
  type Store,
  SyncedStore,
} from '@ratewindow/core'
import { describe, expect, it, vi } from 'vitest'
import { ManualClock } from './support/clock.js'
import { clusterClient, standaloneClient, uniquePrefix } from './support/redis.js'

const at = (iso: string) => Date.parse(iso)
const HOUR = 3_600_000

/** Monthly from the 31st at midnight in Paris: the 28th in February, the 31st in March, the 30th in April. */
const billing = () =>
  quota({ limit: 3, period: 'month', anchor: '2026-01-31T00:00', timeZone: 'Europe/Paris', name: 'monthly' })

const view = ({ allowed, remaining, reset, retryAfter }: RateLimitResult) => ({
  allowed,
  remaining,
  reset,
  retryAfter,
})

type MakeStore = (clock: ManualClock) => Store

const STORES: [string, MakeStore][] = [
  ['MemoryStore', (clock) => new MemoryStore({ clock: clock.read })],
  ['RedisStore on one server', (clock) => new RedisStore({ client: standaloneClient(), clock: clock.read })],
  ['RedisStore on a Cluster', (clock) => new RedisStore({ client: clusterClient(), clock: clock.read })],
  // Quotas are never synchronised by deltas: the exact RedisStore on the same client decides them.
  [
    'SyncedStore',
    (clock) => new SyncedStore({ client: standaloneClient(), clock: clock.read, interval: '1h' }),
  ],
]

function limiterOn(makeStore: MakeStore, start: number, options: Partial<RateLimiterOptions> = {}) {
  const clock = new ManualClock(start)
  const limiter = new RateLimiter({
    rules: billing(),
    store: makeStore(clock),
    prefix: uniquePrefix(),
    timeout: '10s',
    ...options,
  })
  return { clock, limiter }
}

describe.each(STORES)('quota rules on %s', (_name, makeStore) => {
  it('follow the billing anchor across a short February and the change to summer time', async () => {
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    // The period from the 31st of January (23:00 UTC on the 30th) ends at midnight on the 28th of February, Paris.
    const { clock, limiter } = limiterOn(makeStore, at('2026-02-27T20:00:00Z'))
    const seen = []
    for (let i = 0; i < 4; i++) seen.push(view(await limiter.limit('acme')))
    expect(seen).toEqual([
      { allowed: true, remaining: 2, reset: 3 * HOUR, retryAfter: 0 },
      { allowed: true, remaining: 1, reset: 3 * HOUR, retryAfter: 0 },
      { allowed: true, remaining: 0, reset: 3 * HOUR, retryAfter: 0 },
      { allowed: false, remaining: 0, reset: 3 * HOUR, retryAfter: 3 * HOUR },
    ])
    clock.set(at('2026-02-27T22:59:59.999Z'))
    expect(view(await limiter.limit('acme'))).toMatchObject({ allowed: false, retryAfter: 1 })
    // Midnight in Paris: the next period, to midnight on the 31st of March, in summer time since the 29th (22:00 UTC
    // on the 30th): 31 days less the hour the clocks skipped.
    clock.set(at('2026-02-27T23:00:00Z'))
    expect(view(await limiter.limit('acme'))).toEqual({
      allowed: true,
      remaining: 2,
      reset: at('2026-03-30T22:00:00Z') - at('2026-02-27T23:00:00Z'),
      retryAfter: 0,
    })
    clock.set(at('2026-03-29T01:30:00Z'))
    expect(view(await limiter.peek('acme'))).toMatchObject({
      remaining: 2,
      reset: at('2026-03-30T22:00:00Z') - at('2026-03-29T01:30:00Z'),
    })
    // Another key, first seen in April: its period is April's, from the 31st of March to the 30th of April.
    clock.set(at('2026-04-10T12:00:00Z'))
    expect(view(await limiter.limit('globex'))).toMatchObject({
      remaining: 2,
      reset: at('2026-04-29T22:00:00Z') - at('2026-04-10T12:00:00Z'),
    })
  })

  it('a daily quota and a rate rule decide in one atomic step: a request the rate refuses spends no quota', async () => {
    const start = at('2026-03-29T09:00:00Z')
    const { clock, limiter } = limiterOn(makeStore, start, {
      rules: [
        fixedWindow({ limit: 2, window: '1m' }),
        quota({ limit: 5, period: 'day', timeZone: 'Europe/Paris', name: 'daily' }),
      ],
    })
    expect((await limiter.limit('acme')).allowed).toBe(true)
    expect((await limiter.limit('acme')).allowed).toBe(true)
    const refused = await limiter.limit('acme')
    expect(refused.allowed).toBe(false)
    expect(refused.rule?.name).toBe('2-per-1m')
    clock.advance(60_000)
    const third = await limiter.limit('acme')
    // The 29th of March has 23 hours in Paris: it ends at 22:00 UTC.
    expect(third.rules[1]).toMatchObject({
      remaining: 2,
      reset: at('2026-03-29T22:00:00Z') - at('2026-03-29T09:01:00Z'),
    })
    const inspected = await limiter.operator.inspect('acme')
    expect(inspected.rules.map(({ name, used }) => [name, used])).toEqual([
      ['2-per-1m', 1],
      ['daily', 3],
    ])
  })

  it("a settle's debt carries into the next period, and only into it", async () => {
    const { clock, limiter } = limiterOn(makeStore, at('2026-02-27T22:00:00Z'))
    const result = await limiter.limit('acme')
    // 1 estimated, 5 used: 2 past the limit, owed.
    expect(await limiter.settle(result, 5)).toEqual({ charged: 4, refunded: 0, uncharged: 0 })
    expect(view(await limiter.peek('acme'))).toMatchObject({ remaining: 0 })
    clock.set(at('2026-02-27T23:00:00Z'))
    expect(view(await limiter.limit('acme'))).toMatchObject({ allowed: true, remaining: 0 })
    clock.set(at('2026-03-30T22:00:00Z'))
    expect(view(await limiter.peek('acme'))).toMatchObject({ remaining: 3 })
  })

  it("an override raises one customer's quota for the period it counts in", async () => {
    const { limiter } = limiterOn(makeStore, at('2026-02-10T12:00:00Z'), { overrides: true })
    for (let i = 0; i < 3; i++) await limiter.limit('acme')
    expect((await limiter.limit('acme')).allowed).toBe(false)
    await limiter.operator.set('acme', { limit: 10 })
    expect(view(await limiter.limit('acme'))).toMatchObject({ allowed: true, remaining: 6 })
    expect((await limiter.limit('globex')).remaining).toBe(2)
  })
})

describe('quota rules on RedisStore', () => {
  it('adopt the period end a key holds (a process whose tzdata differs wrote it)', async () => {
    const client = standaloneClient()
    const clock = new ManualClock(at('2026-02-10T12:00:00Z'))
    const store = new RedisStore({ client, clock: clock.read })
    const rule = billing()
    const limiter = new RateLimiter({ rules: rule, store, prefix: uniquePrefix() })
    const foreignEnd = at('2026-02-27T22:00:00Z')
    await client.set(store.keyFor(limiter.namespace, 'acme', rule), `${foreignEnd}:1`, 'PX', 30 * 24 * HOUR)
    expect(view(await limiter.limit('acme'))).toMatchObject({
      remaining: 1,
      reset: foreignEnd - at('2026-02-10T12:00:00Z'),
    })
    // Past that end, the period this process computes.
    clock.set(foreignEnd)
    expect(view(await limiter.limit('acme'))).toMatchObject({ remaining: 2, reset: HOUR })
  })

  it('a group of decisions decides as the same calls one after another on a MemoryStore', async () => {
    const start = at('2026-02-27T22:59:59.000Z')
    const redis = limiterOn(
      (clock) => new RedisStore({ client: standaloneClient(), clock: clock.read }),
      start,
    )
    const memory = limiterOn((clock) => new MemoryStore({ clock: clock.read }), start)
    const expected = []
    for (let i = 0; i < 5; i++) expected.push(view(await memory.limiter.limit('acme')))
    const grouped = await Promise.all(Array.from({ length: 5 }, () => redis.limiter.limit('acme')))
    expect(grouped.map(view)).toEqual(expected)
  })
})

describe('quota rules refused or warned at construction', () => {
  it('names the option of a bad period or zone', () => {
    expect(() => quota({ limit: 5, period: 'fortnight' as 'week' })).toThrow(/`period`/)
    expect(() => quota({ limit: 5, period: 'day', timeZone: 'Mars/Olympus' })).toThrow(/`timeZone`/)
    expect(() => quota({ limit: 5, period: 'day', anchor: '2026-02-30' })).toThrow(/`anchor`/)
    expect(() => quota({ limit: 0, period: 'day' })).toThrow(/`limit`/)
  })

  it('a store that cannot decide quotas is refused, naming it', () => {
    const memory = new MemoryStore()
    const custom: Store = {
      consume: (request) => memory.consume(request),
      peek: (request) => memory.peek(request),
      refund: (request) => memory.refund(request),
      reset: (target) => memory.reset(target),
    }
    expect(() => new RateLimiter({ rules: quota({ limit: 5, period: 'day' }), store: custom })).toThrow(
      /A `quota` rule needs a store that decides with its calendar periods/,
    )
  })

  it('a MemoryStore left at its default maxKeys warns once that a count would restart; one sized on purpose does not', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const warnings = () =>
      warn.mock.calls.filter(
        ([, options]) => (options as { code?: string })?.code === 'RATEWINDOW_QUOTA_EVICTION',
      )
    const store = new MemoryStore()
    new RateLimiter({ rules: quota({ limit: 5, period: 'month' }), store, prefix: 'a' })
    new RateLimiter({ rules: quota({ limit: 9, period: 'month' }), store, prefix: 'b' })
    expect(warnings()).toHaveLength(1)
    expect(String(warnings()[0]?.[0])).toMatch(/default `maxKeys` \(100000\)/)
    new RateLimiter({
      rules: quota({ limit: 5, period: 'month' }),
      store: new MemoryStore({ maxKeys: 2_000_000 }),
    })
    expect(warnings()).toHaveLength(1)
    warn.mockRestore()
  })
})
