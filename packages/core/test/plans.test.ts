/**
 * Issue 47, item 1: plans checked at construction. Plans of one shape (differing in limits and bursts only), names a
 * store can record, a default plan among them, `plans` instead of `rules`, a store that records plans, and the
 * middleware's `plan` only with `plans`: each refused with an error naming the option.
 */
import {
  fixedWindow,
  gcra,
  MemoryStore,
  quota,
  RateLimiter,
  type Store,
  slidingWindowCounter,
  tokenBucket,
} from '@ratewindow/core'
import { HttpRateLimiter } from '@ratewindow/core/adapter'
import { describe, expect, it } from 'vitest'

const store = () => new MemoryStore({ maxKeys: 1_000 })

describe('plans: construction', () => {
  it('accept plans of one shape, differing in limits and bursts', async () => {
    const limiter = new RateLimiter({
      store: store(),
      plans: {
        free: [
          gcra({ limit: 10, window: '1m', name: 'rate' }),
          tokenBucket({ capacity: 5, refillRate: 1, name: 'bucket' }),
          quota({ limit: 100, period: 'month', name: 'monthly' }),
        ],
        pro: [
          gcra({ limit: 100, window: '1m', burst: 200, name: 'rate' }),
          tokenBucket({ capacity: 50, refillRate: 10, name: 'bucket' }),
          quota({ limit: 10_000, period: 'month', name: 'monthly' }),
        ],
      },
    })
    expect(limiter.plans).toEqual(['free', 'pro'])
    expect(limiter.rules.map((rule) => rule.limit)).toEqual([10, 5, 100])
    const pro = await limiter.limit('a', { plan: 'pro' })
    expect(pro.rules.map((each) => each.rule.limit)).toEqual([200, 50, 10_000])
    // No plan: the first one.
    expect((await limiter.limit('b')).plan).toBe('free')
  })

  it.each([
    [
      'another window',
      { free: fixedWindow({ limit: 1, window: '1m' }), pro: fixedWindow({ limit: 2, window: '1h' }) },
      /`plans.pro` must have the first plan's shape/,
    ],
    [
      'another algorithm',
      {
        free: fixedWindow({ limit: 1, window: '1m' }),
        pro: slidingWindowCounter({ limit: 2, window: '1m' }),
      },
      /`plans.pro` must have the first plan's shape/,
    ],
    [
      'another number of rules',
      {
        free: fixedWindow({ limit: 1, window: '1m' }),
        pro: [fixedWindow({ limit: 2, window: '1m' }), quota({ limit: 5, period: 'day' })],
      },
      /`plans.pro` must have the first plan's shape: 1 rule/,
    ],
    [
      'another warnAt',
      {
        free: fixedWindow({ limit: 10, window: '1m', warnAt: 0.8 }),
        pro: fixedWindow({ limit: 20, window: '1m' }),
      },
      /warnAt 0.8/,
    ],
    [
      'a name a store cannot record',
      { 'free plan': fixedWindow({ limit: 1, window: '1m' }) },
      /`plans`.*plan names/,
    ],
    ['no plan', {}, /`plans`.*1 to 64 named plans/],
  ])('refuse plans with %s', (_, plans, message) => {
    expect(() => new RateLimiter({ store: store(), plans: plans as never })).toThrow(message)
  })

  it('refuse `plans` with `rules`, an unknown `defaultPlan`, and a store that records no plans', () => {
    const plans = { free: fixedWindow({ limit: 1, window: '1m' }) }
    expect(() => new RateLimiter({ store: store(), plans, rules: plans.free })).toThrow(/`plans` and `rules`/)
    expect(() => new RateLimiter({ store: store(), plans, defaultPlan: 'gold' })).toThrow(
      /`defaultPlan`.*one of the plans: free/,
    )
    expect(() => new RateLimiter({ store: store(), rules: plans.free, defaultPlan: 'free' })).toThrow(
      /`defaultPlan`.*with `plans`/,
    )
    const plain: Store = {
      consume: () => ({ allowed: true, now: 0, outcomes: [] }),
      peek: () => ({ allowed: true, now: 0, outcomes: [] }),
      refund() {},
      reset() {},
    }
    expect(() => new RateLimiter({ store: plain, plans })).toThrow(
      /`plans` needs a store that records the plan/,
    )
  })

  it('refuse a plan named to a limiter without plans, and an unknown one without a default', async () => {
    const limiter = new RateLimiter({ store: store(), rules: fixedWindow({ limit: 1, window: '1m' }) })
    await expect(limiter.limit('a', { plan: 'pro' })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_UNKNOWN_PLAN',
    })
    const planned = new RateLimiter({
      store: store(),
      plans: { free: fixedWindow({ limit: 1, window: '1m' }) },
    })
    await expect(planned.limit('a', { plan: 'x'.repeat(10_000) })).rejects.toThrow(
      /is not one of this limiter's plans \(free\)/,
    )
  })

  it('refuse the middleware options that do not go with plans', () => {
    const plans = { free: fixedWindow({ limit: 1, window: '1m' }) }
    const make = (options: object) => new HttpRateLimiter(options as never, { name: 'test' } as never)
    expect(() => make({ plans, limit: 5 })).toThrow(/`plans` replaces `rules`, `limit`/)
    expect(() => make({ plan: () => 'free' })).toThrow(/`plan`.*a function given with `plans`/)
    expect(() => make({ plans, plan: 'free' })).toThrow(/`plan`.*a function/)
  })
})
