/**
 * Quotas on the calendar (`quota`): a billing anchor across a short February and a change to summer time, a quota
 * and a rate rule in one atomic decision, a settle's debt carried into the next period, an override of one key's
 * quota, and random traces across a boundary against the reference model. For a store with `quotas: true`.
 */
import {
  fixedWindow,
  quota,
  RateLimiter,
  type RateLimiterOptions,
  type RateLimitResult,
  type Rule,
} from '@ratewindow/core'
import fc from 'fast-check'
import { TestClock } from '../clock.js'
import { type Admission, remainingOf } from '../reference.js'
import { nextPrefix, type SuiteContext } from './context.js'

const HOUR = 3_600_000
const at = (iso: string) => Date.parse(iso)
const view = ({ allowed, remaining, reset, retryAfter }: RateLimitResult) => ({
  allowed,
  remaining,
  reset,
  retryAfter,
})

/** Monthly from the 31st at midnight in Paris: the 28th in February, the 31st in March, the 30th in April. */
const billing = () =>
  quota({ limit: 3, period: 'month', anchor: '2026-01-31T00:00', timeZone: 'Europe/Paris', name: 'monthly' })

export function describeQuotas(suite: SuiteContext): void {
  const { describe, expect, it, numRuns, subject } = suite
  /** A limiter of `rules` on the store under test at `start`, or undefined for a store without quotas. */
  async function setup(rules: Rule | Rule[], start: number, more: Partial<RateLimiterOptions> = {}) {
    const clock = new TestClock(start)
    const store = await subject.createStore(clock)
    if (subject.quotas === true) expect(store.quotas).toBe(true)
    if (store.quotas !== true) return undefined
    const limiter = new RateLimiter({ rules, store, prefix: nextPrefix(), timeout: '30s', ...more })
    return { clock, store, limiter }
  }

  describe(`${subject.name}: quotas on the calendar`, () => {
    it('follow a billing anchor on the 31st across a short February and the change to summer time', async () => {
      const made = await setup(billing(), at('2026-02-27T20:00:00Z'))
      if (made === undefined) return
      const { clock, limiter } = made
      const seen = []
      for (let i = 0; i < 4; i++) seen.push(view(await limiter.limit('acme')))
      // The period from the 31st of January ends at midnight on the 28th of February in Paris: 23:00 UTC.
      expect(seen).toEqual([
        { allowed: true, remaining: 2, reset: 3 * HOUR, retryAfter: 0 },
        { allowed: true, remaining: 1, reset: 3 * HOUR, retryAfter: 0 },
        { allowed: true, remaining: 0, reset: 3 * HOUR, retryAfter: 0 },
        { allowed: false, remaining: 0, reset: 3 * HOUR, retryAfter: 3 * HOUR },
      ])
      clock.set(at('2026-02-27T22:59:59.999Z'))
      expect(view(await limiter.limit('acme'))).toMatchObject({ allowed: false, retryAfter: 1 })
      // The next period ends at midnight on the 31st of March, in summer time since the 29th: 22:00 UTC on the 30th.
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
      // What a billing page shows: used and limit, and when the period ends (the peek charges nothing).
      expect(await limiter.usage('acme')).toEqual({
        key: 'acme',
        at: at('2026-03-29T01:30:00Z'),
        rules: [
          {
            name: 'monthly',
            limit: 3,
            used: 1,
            remaining: 2,
            resets: at('2026-03-30T22:00:00Z'),
            periodEnd: at('2026-03-30T22:00:00Z'),
          },
        ],
      })
      // A key first seen in April counts in April's period, to midnight on the 30th.
      clock.set(at('2026-04-10T12:00:00Z'))
      expect(view(await limiter.limit('globex'))).toMatchObject({
        remaining: 2,
        reset: at('2026-04-29T22:00:00Z') - at('2026-04-10T12:00:00Z'),
      })
    })

    it('a daily quota and a rate rule decide in one atomic step: a request the rate refuses spends no quota', async () => {
      const made = await setup(
        [
          fixedWindow({ limit: 2, window: '1m' }),
          quota({ limit: 5, period: 'day', timeZone: 'Europe/Paris', name: 'daily' }),
        ],
        at('2026-03-29T09:00:00Z'),
      )
      if (made === undefined) return
      const { clock, limiter } = made
      expect((await limiter.limit('acme')).allowed).toBe(true)
      expect((await limiter.limit('acme')).allowed).toBe(true)
      const refused = await limiter.limit('acme')
      expect(refused.allowed).toBe(false)
      expect(refused.rule.name).toBe('2-per-1m')
      clock.advance(60_000)
      const third = await limiter.limit('acme')
      // The 29th of March has 23 hours in Paris: it ends at 22:00 UTC.
      expect(third.rules[1]).toMatchObject({
        remaining: 2,
        reset: at('2026-03-29T22:00:00Z') - at('2026-03-29T09:01:00Z'),
      })
      expect(await limiter.peek('acme')).toMatchObject({ allowed: true })
    })

    it("a settle's debt carries into the next period, and only into it", async () => {
      const made = await setup(billing(), at('2026-02-27T22:00:00Z'))
      if (made === undefined) return
      const { clock, limiter } = made
      const result = await limiter.limit('acme')
      // 1 estimated, 5 used: 2 past the limit, owed.
      expect(await limiter.settle(result, 5)).toEqual({ charged: 4, refunded: 0, uncharged: 0 })
      expect(view(await limiter.peek('acme'))).toMatchObject({ remaining: 0 })
      clock.set(at('2026-02-27T23:00:00Z'))
      expect(view(await limiter.limit('acme'))).toMatchObject({ allowed: true, remaining: 0 })
      clock.set(at('2026-03-30T22:00:00Z'))
      expect(view(await limiter.peek('acme'))).toMatchObject({ remaining: 3 })
    })

    it("an override raises one key's quota for the period it counts in (a store with overrides)", async () => {
      const made = await setup(billing(), at('2026-02-10T12:00:00Z'), { overrides: true }).catch(
        (error: unknown) => {
          // A store without overrides refuses `overrides: true`: nothing to check here.
          if ((error as { code?: string }).code === 'ERR_RATEWINDOW_INVALID_OPTION') return undefined
          throw error
        },
      )
      if (made === undefined || made.store.overrides !== true) return
      const { limiter } = made
      for (let i = 0; i < 3; i++) await limiter.limit('acme')
      expect((await limiter.limit('acme')).allowed).toBe(false)
      await limiter.operator.set('acme', { limit: 10 })
      expect(view(await limiter.limit('acme'))).toMatchObject({ allowed: true, remaining: 6 })
      expect((await limiter.limit('globex')).remaining).toBe(2)
    })

    it('a count left above the limit by a raise that ended is no debt: the next period starts afresh', async () => {
      const made = await setup(
        quota({ limit: 100, period: 'day', name: 'daily' }),
        at('2026-03-10T12:00:00Z'),
        { overrides: true },
      ).catch((error: unknown) => {
        if ((error as { code?: string }).code === 'ERR_RATEWINDOW_INVALID_OPTION') return undefined
        throw error
      })
      if (made === undefined || made.store.overrides !== true) return
      const { clock, limiter } = made
      // A raise to 1,000 for six hours, all of it used; then it ends.
      await limiter.operator.set('acme', { limit: 1_000 }, { ttl: 6 * HOUR })
      for (let i = 0; i < 10; i++) expect((await limiter.limit('acme', { cost: 100 })).allowed).toBe(true)
      clock.set(at('2026-03-10T20:00:00Z'))
      // 1,000 used of 100: refused until the day ends (4 hours), not a day more.
      expect(view(await limiter.limit('acme'))).toMatchObject({ allowed: false, retryAfter: 4 * HOUR })
      clock.set(at('2026-03-11T00:00:00Z'))
      expect(view(await limiter.limit('acme'))).toMatchObject({ allowed: true, remaining: 99 })
    })

    it('random traces across a day that ends early (summer time) equal the reference model', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.record({ step: fc.integer({ min: 0, max: 2 * HOUR }), cost: fc.integer({ min: 1, max: 3 }) }),
            {
              minLength: 1,
              maxLength: 12,
            },
          ),
          async (trace) => {
            const rule = quota({ limit: 6, period: 'day', timeZone: 'Europe/Paris' })
            const made = await setup(rule, at('2026-03-29T17:00:00Z'))
            if (made === undefined) return
            const { clock, limiter } = made
            const history: Admission[] = []
            for (const { step, cost } of trace) {
              clock.advance(step)
              const now = clock.read()
              const result = await limiter.limit('k', { cost })
              const expected = remainingOf(rule, history, now) >= cost
              expect(result.allowed).toBe(expected)
              if (result.allowed) history.push({ time: now, cost })
              expect(result.remaining).toBe(remainingOf(rule, history, now))
            }
          },
        ),
        { numRuns: Math.max(10, Math.floor(numRuns / 10)) },
      )
    })
  })
}
