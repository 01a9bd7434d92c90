/**
 * Plans (`plans`, docs/plans-and-quotas.md): named rule sets of one shape on one key's state. A plan change keeps the
 * period's usage (window, GCRA and token bucket rules, a monthly quota); the plan in force is recorded with the key's
 * state in the call that decides, so a peek, `inspect`, `usage` and `top` (a store that scans) read each key's plan
 * and limits; an override of one rule applies over the plan's; a settle charges under the plan. For a store with
 * `plans: true`.
 */
import { fixedWindow, gcra, quota, RateLimiter, type RateLimiterOptions, tokenBucket } from '@ratewindow/core'
import { TestClock } from '../clock.js'
import { MINUTE, nextPrefix, type SuiteContext } from './context.js'

const START = Date.parse('2026-03-10T12:00:00Z')

/** Two plans of one shape: per minute, a GCRA rate, a token bucket and a monthly quota. */
const plans = () => ({
  free: [
    fixedWindow({ limit: 3, window: '1m', name: 'per-minute' }),
    gcra({ limit: 60, window: '1h', burst: 4, name: 'hourly' }),
    tokenBucket({ capacity: 5, refillRate: 1, interval: '1m', name: 'bucket' }),
    quota({ limit: 10, period: 'month', timeZone: 'UTC', name: 'monthly' }),
  ],
  pro: [
    fixedWindow({ limit: 6, window: '1m', name: 'per-minute' }),
    gcra({ limit: 600, window: '1h', burst: 8, name: 'hourly' }),
    tokenBucket({ capacity: 10, refillRate: 2, interval: '1m', name: 'bucket' }),
    quota({ limit: 1000, period: 'month', timeZone: 'UTC', name: 'monthly' }),
  ],
})

export function describePlans(suite: SuiteContext): void {
  const { describe, expect, it, subject } = suite
  /** A planned limiter on the store under test, or undefined for a store without plans. */
  async function setup(more: Partial<RateLimiterOptions> = {}) {
    const clock = new TestClock(START)
    const store = await subject.createStore(clock)
    if (subject.plans === true) expect(store.plans).toBe(true)
    if (store.plans !== true) return undefined
    const limiter = new RateLimiter({
      plans: plans(),
      store,
      prefix: nextPrefix(),
      timeout: '30s',
      ...more,
    })
    return { clock, store, limiter }
  }
  const limitsOf = (rules: readonly { rule: { limit: number } }[]) => rules.map((each) => each.rule.limit)

  describe(`${subject.name}: plans`, () => {
    it("decide each request with its plan's limits, and a plan change keeps the period's usage", async () => {
      const made = await setup()
      if (made === undefined) return
      const { limiter } = made
      const free = []
      for (let i = 0; i < 4; i++) free.push(await limiter.limit('acme', { plan: 'free' }))
      expect(free.map((each) => each.allowed)).toEqual([true, true, true, false])
      expect(free[0]!.plan).toBe('free')
      expect(free[0]!.overridden).toBeUndefined()
      expect(limitsOf(free[0]!.rules)).toEqual([3, 4, 5, 10])
      // The upgrade: the 3 units counted stay counted, under the pro limits.
      const pro = []
      for (let i = 0; i < 4; i++) pro.push(await limiter.limit('acme', { plan: 'pro' }))
      expect(pro.map((each) => each.allowed)).toEqual([true, true, true, false])
      expect(pro[0]).toMatchObject({ plan: 'pro', limit: 6, remaining: 2 })
      expect(limitsOf(pro[0]!.rules)).toEqual([6, 8, 10, 1000])
      // Back to free: 6 used of 3 per minute, 6 of a bucket of 5, 6 of 10 this month.
      const down = await limiter.limit('acme', { plan: 'free' })
      expect(down).toMatchObject({ allowed: false, plan: 'free', remaining: 0 })
      expect(limitsOf(down.rules)).toEqual([3, 4, 5, 10])
      expect(down.rules.find((each) => each.rule.name === 'monthly')).toMatchObject({
        rule: { limit: 10 },
        remaining: 4,
      })
    })

    it('record the plan in force: a peek, inspect and usage without a plan read it, with its limits', async () => {
      const made = await setup()
      if (made === undefined) return
      const { limiter } = made
      await limiter.limit('acme', { plan: 'pro' })
      await limiter.limit('acme', { plan: 'pro' })
      await limiter.limit('solo', { plan: 'free' })
      expect(await limiter.peek('acme')).toMatchObject({ plan: 'pro', limit: 6, remaining: 4 })
      const inspection = await limiter.operator.inspect('acme')
      expect(inspection.plan).toBe('pro')
      expect(
        inspection.rules.map(({ name, limit, used, overridden }) => ({ name, limit, used, overridden })),
      ).toEqual([
        { name: 'per-minute', limit: 6, used: 2, overridden: false },
        { name: 'hourly', limit: 8, used: 2, overridden: false },
        { name: 'bucket', limit: 10, used: 2, overridden: false },
        { name: 'monthly', limit: 1000, used: 2, overridden: false },
      ])
      const usage = await limiter.usage('solo')
      expect(usage.plan).toBe('free')
      expect(usage.rules.map(({ name, limit, used }) => ({ name, limit, used }))).toEqual([
        { name: 'per-minute', limit: 3, used: 1 },
        { name: 'hourly', limit: 4, used: 1 },
        { name: 'bucket', limit: 5, used: 1 },
        { name: 'monthly', limit: 10, used: 1 },
      ])
      // A key never decided has no plan recorded: the first plan's rules.
      const fresh = await limiter.operator.inspect('nobody')
      expect(fresh.plan).toBeUndefined()
      expect(fresh.rules.map((rule) => rule.limit)).toEqual([3, 4, 5, 10])
      // A peek may ask under a plan of its own, writing nothing.
      expect(await limiter.peek('acme', { plan: 'free' })).toMatchObject({
        plan: 'free',
        limit: 3,
        remaining: 1,
      })
      expect((await limiter.operator.inspect('acme')).plan).toBe('pro')
    })

    it("rank `top` by the share of each key's own limit, showing its plan", async () => {
      const made = await setup()
      if (made === undefined) return
      const { limiter, store } = made
      if (typeof store.scanStored !== 'function' || typeof store.peekStored !== 'function') return
      // 3 of pro's 6 per minute (50 %) against 2 of free's 3 (67 %).
      for (let i = 0; i < 3; i++) await limiter.limit('big', { plan: 'pro' })
      for (let i = 0; i < 2; i++) await limiter.limit('small', { plan: 'free' })
      // The store may be shared with other tests' keys: the scan reads them all.
      const { keys } = await limiter.operator.top({ count: 2, scan: 1_000_000 })
      expect(keys.map(({ plan, rule, used, limit }) => ({ plan, rule, used, limit }))).toEqual([
        { plan: 'free', rule: 'per-minute', used: 2, limit: 3 },
        { plan: 'pro', rule: 'per-minute', used: 3, limit: 6 },
      ])
    })

    it("apply an operator's override of one rule over the plan's limits, and the plan again when it ends", async () => {
      const made = await setup()
      if (made === undefined || made.store.overrides !== true) return
      const { limiter, clock } = made
      await limiter.operator.set('acme', { rules: { 'per-minute': { limit: 20 } } }, { ttl: '10m' })
      const raised = await limiter.limit('acme', { plan: 'pro' })
      expect(raised).toMatchObject({ plan: 'pro', overridden: true, limit: 8 })
      expect(limitsOf(raised.rules)).toEqual([20, 8, 10, 1000])
      const inspection = await limiter.operator.inspect('acme')
      expect(inspection.rules.map((rule) => rule.overridden)).toEqual([true, false, false, false])
      clock.advance(10 * MINUTE)
      const after = await limiter.limit('acme', { plan: 'pro' })
      expect(after.overridden).toBeUndefined()
      expect(limitsOf(after.rules)).toEqual([6, 8, 10, 1000])
    })

    it("end a downgraded key's window at its new limit, never owing what the higher plan admitted", async () => {
      // Outside round 1 (F1): 50 of pro's 100 an hour, then free's 10 an hour: the hour is used, the next ones are not.
      const hourly = {
        free: [fixedWindow({ limit: 10, window: '1h', name: 'hourly' })],
        pro: [fixedWindow({ limit: 100, window: '1h', name: 'hourly' })],
      }
      for (const freeInFirstHour of [false, true]) {
        const made = await setup({ plans: hourly })
        if (made === undefined) return
        const { clock, limiter } = made
        for (let i = 0; i < 50; i++) await limiter.limit('k', { plan: 'pro' })
        if (freeInFirstHour) {
          clock.advance(1_000)
          expect(await limiter.limit('k', { plan: 'free' })).toMatchObject({ allowed: false, remaining: 0 })
        }
        const admitted = []
        for (let hour = 1; hour <= 3; hour++) {
          clock.set(START + hour * 3_600_000 + MINUTE)
          let count = 0
          for (let i = 0; i < 12; i++) if ((await limiter.limit('k', { plan: 'free' })).allowed) count++
          admitted.push(count)
        }
        expect(admitted).toEqual([10, 10, 10])
      }
    })

    it('keep the usage a key flapping between plans counted: never more than the larger plan per window', async () => {
      // Outside round 2: a plan that flaps (a self-serve downgrade and upgrade) must erase nothing.
      const mixed = {
        free: [
          fixedWindow({ limit: 10, window: '1h', name: 'hourly' }),
          gcra({ limit: 10, window: '1h', name: 'rate' }),
          tokenBucket({ capacity: 10, refillRate: 10, interval: '1h', name: 'bucket' }),
        ],
        pro: [
          fixedWindow({ limit: 100, window: '1h', name: 'hourly' }),
          gcra({ limit: 100, window: '1h', name: 'rate' }),
          tokenBucket({ capacity: 100, refillRate: 100, interval: '1h', name: 'bucket' }),
        ],
      }
      const made = await setup({ plans: mixed })
      if (made === undefined) return
      const { limiter } = made
      let admitted = 0
      for (let round = 0; round < 10; round++) {
        for (let i = 0; i < 20; i++) if ((await limiter.limit('k', { plan: 'pro' })).allowed) admitted++
        if ((await limiter.limit('k', { plan: 'free' })).allowed) admitted++
      }
      expect(admitted).toBe(100)
      // GCRA and the token bucket keep the units used, resting at the lower plan's rate.
      const down = await limiter.limit('k', { plan: 'free' })
      expect(down.allowed).toBe(false)
      // A cost only the larger plan admits: decided under it, refused as a programming error under the smaller.
      expect((await limiter.limit('big', { plan: 'pro', cost: 50 })).allowed).toBe(true)
      const refused = await limiter.limit('big', { plan: 'free', cost: 50 }).then(
        () => undefined,
        (error: unknown) => error,
      )
      expect(refused).toMatchObject({ code: 'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT' })
    })

    it("let wait() take the call's plan, and keep what a flap between wait() and limit() counted", async () => {
      // Outside round 2 (H2): wait() had no plan (the first plan's rate for every call).
      const made = await setup({
        plans: {
          free: gcra({ limit: 10, window: '1h', name: 'rate' }),
          pro: gcra({ limit: 100, window: '1h', name: 'rate' }),
        },
      })
      if (made === undefined || made.store.reservations !== true) return
      const { limiter } = made
      let admitted = 0
      for (let i = 0; i < 60; i++)
        if ((await limiter.wait('k', { plan: 'pro', maxWait: 0 })).allowed) admitted++
      for (let i = 0; i < 60; i++) if ((await limiter.limit('k', { plan: 'pro' })).allowed) admitted++
      expect(admitted).toBe(100)
      const waited = await limiter.wait('k', { plan: 'free', maxWait: 0 }).then(
        () => undefined,
        (error: unknown) => error,
      )
      expect(waited).toMatchObject({ code: 'ERR_RATEWINDOW_WAIT_EXCEEDED' })
      expect((await limiter.limit('k', { plan: 'pro' })).allowed).toBe(false)
    })

    it('carry a debt window by window at the limit in force at each, whatever plan a refused request named', async () => {
      // Outside round 3 (5): RedisStore wrote no window a refused request carried a debt into, and rolled a later
      // one over several windows at one plan's limit: it admitted from window 10 where MemoryStore did from 14.
      const made = await setup({
        maxDebt: 200,
        plans: {
          free: fixedWindow({ limit: 10, window: '1m', name: 'w' }),
          pro: fixedWindow({ limit: 20, window: '1m', name: 'w' }),
        },
      })
      if (made === undefined) return
      const { clock, limiter } = made
      const result = await limiter.limit('k', { plan: 'free' })
      expect(await limiter.settle(result, 201)).toMatchObject({ charged: 200 })
      const seen = []
      for (let window = 1; window <= 16; window++) {
        clock.set(START + window * MINUTE + 1_000)
        const plan = window % 2 === 0 ? 'pro' : 'free'
        const decided = await limiter.limit('k', { plan })
        seen.push(
          `${decided.allowed ? 'admitted' : 'refused'} ${(await limiter.operator.inspect('k')).rules[0]!.used}`,
        )
      }
      expect(seen).toEqual([
        'refused 191',
        'refused 181',
        'refused 161',
        'refused 151',
        'refused 131',
        'refused 121',
        'refused 101',
        'refused 91',
        'refused 71',
        'refused 61',
        'refused 41',
        'refused 31',
        'refused 11',
        'admitted 2',
        'admitted 1',
        'admitted 1',
      ])
    })

    it('settle a request under its plan, and refuse an unknown plan unless a default plan answers', async () => {
      const made = await setup()
      if (made === undefined) return
      const { limiter, store } = made
      const result = await limiter.limit('acme', { plan: 'pro' })
      const settled = await limiter.settle(result, 5)
      expect(settled).toMatchObject({ charged: 4, uncharged: 0 })
      expect(await limiter.peek('acme')).toMatchObject({ plan: 'pro', limit: 6, remaining: 1 })
      const unknown = await limiter.limit('acme', { plan: 'gold' }).then(
        () => undefined,
        (error: unknown) => error,
      )
      expect(unknown).toMatchObject({ code: 'ERR_RATEWINDOW_UNKNOWN_PLAN' })
      const defaulted = new RateLimiter({
        plans: plans(),
        defaultPlan: 'free',
        store,
        prefix: nextPrefix(),
        timeout: '30s',
      })
      expect(await defaulted.limit('acme', { plan: 'gold' })).toMatchObject({ allowed: true, plan: 'free' })
      expect(await defaulted.limit('acme')).toMatchObject({ allowed: true, plan: 'free' })
    })
  })
}
