/**
 * Issue 47, item 3: quota rules on the calendar. The conformance suite's quotas section (packages/testing, run on
 * MemoryStore, RedisStore with every client on one server and a Cluster, and the Durable Object store) drives each
 * store's clock through a month's end, a short February, an anchor on the 31st and the change to summer time; here,
 * the same section on SyncedStore, what only Redis can show (a period end another process stored, adopted as it is;
 * a group of decisions in one script), and what is refused or warned at construction.
 */
import {
  MemoryStore,
  quota,
  RateLimiter,
  type RateLimitResult,
  RedisStore,
  type Store,
  SyncedStore,
} from '@ratewindow/core'
import { describeQuotaConformance } from '@ratewindow/testing'
import { describe, expect, it, vi } from 'vitest'
import { ManualClock } from './support/clock.js'
import { standaloneClient, uniquePrefix } from './support/redis.js'

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

// SyncedStore decides quotas through the exact RedisStore on its client (its other sections: synced-store.test.ts).
describeQuotaConformance(
  { describe, it, expect },
  {
    name: 'SyncedStore',
    createStore: (clock) =>
      new SyncedStore({ client: standaloneClient(), clock: clock.read, interval: '1h' }),
  },
)

/** A limiter of the monthly quota on `makeStore`'s store at `start`. */
function limiterOn(makeStore: (clock: ManualClock) => Store, start: number) {
  const clock = new ManualClock(start)
  const limiter = new RateLimiter({
    rules: billing(),
    store: makeStore(clock),
    prefix: uniquePrefix(),
    timeout: '10s',
  })
  return { clock, limiter }
}

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
    // Past that end but inside this process's period (to 23:00 UTC): the same count, to this process's end.
    clock.set(foreignEnd)
    expect(view(await limiter.limit('acme'))).toMatchObject({ remaining: 0, reset: HOUR })
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
