/**
 * Reserve-then-settle: overestimates given back, underestimates charged in full (up to each rule's `maxDebt` past
 * its limit), settle and refund once per result.
 */
import {
  fixedWindow,
  gcra,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import fc from 'fast-check'
import { type Admission, decide, fits } from '../reference.js'
import { buildRule, traceArbitrary } from './arbitraries.js'
import type { SuiteContext } from './context.js'

export function describeReserveThenSettle(suite: SuiteContext): void {
  const { describe, each, expect, it, numRuns, setup, subject } = suite
  describe(`${subject.name}: reserve-then-settle`, () => {
    each([
      ['fixed window', () => fixedWindow({ limit: 10, window: '1h' })],
      ['sliding window log', () => slidingWindowLog({ limit: 10, window: '1h' })],
      ['sliding window counter', () => slidingWindowCounter({ limit: 10, window: '1h' })],
      ['token bucket', () => tokenBucket({ capacity: 10, refillRate: 1, interval: '1h' })],
      ['GCRA', () => gcra({ limit: 1, window: '1h', burst: 10 })],
    ])(
      '%s: an overestimate is given back, an underestimate charged in full up to one limit past the quota',
      async (_, make) => {
        const { limiter } = await setup(make())
        const first = await limiter.limit('k', { cost: 4 })
        expect(await limiter.settle(first, 1)).toEqual({ charged: 0, refunded: 3, uncharged: 0 })
        expect(first.cost).toBe(1)
        expect((await limiter.peek('k', { cost: 0 })).remaining).toBe(9)
        const second = await limiter.limit('k', { cost: 2 })
        expect(await limiter.settle(second, 5)).toEqual({ charged: 3, refunded: 0, uncharged: 0 })
        expect((await limiter.peek('k', { cost: 0 })).remaining).toBe(4)
        // 7 used of 10: 13 more leave the rule 10 past its limit (`maxDebt`: one limit); the other 36 are not charged.
        const third = await limiter.limit('k', { cost: 1 })
        expect(await limiter.settle(third, 50)).toEqual({ charged: 13, refunded: 0, uncharged: 36 })
        expect(await limiter.peek('k')).toMatchObject({ allowed: false, remaining: 0 })
        expect((await limiter.peek('k', { cost: 0 })).remaining).toBe(0)
        // A later refund gives back what is charged now, not the estimate.
        expect(third.cost).toBe(14)
      },
    )

    const SETTLE_RULES: [string, () => Rule][] = [
      ['fixed window', () => fixedWindow({ limit: 10, window: '1h' })],
      ['sliding window log', () => slidingWindowLog({ limit: 10, window: '1h' })],
      ['sliding window counter', () => slidingWindowCounter({ limit: 10, window: '1h' })],
      ['token bucket', () => tokenBucket({ capacity: 10, refillRate: 1, interval: '1h' })],
      ['GCRA', () => gcra({ limit: 1, window: '1h', burst: 10 })],
    ]

    /** A key with 2 units used by other requests, and a cost-8 result to settle or refund. */
    async function twoUsedAndEight(make: () => Rule) {
      const { limiter } = await setup(make())
      expect((await limiter.limit('k', { cost: 2 })).allowed).toBe(true)
      const result = await limiter.limit('k', { cost: 8 })
      expect(result.allowed).toBe(true)
      const remaining = async () => (await limiter.peek('k', { cost: 0 })).remaining
      return { limiter, result, remaining }
    }

    for (const [name, make] of SETTLE_RULES) {
      it(
        '%s: two concurrent settle(result, 0) give back 8, not 16 (the other requests keep their units)'.replace(
          '%s',
          name,
        ),
        async () => {
          const { limiter, result, remaining } = await twoUsedAndEight(make)
          const settled = await Promise.all([limiter.settle(result, 0), limiter.settle(result, 0)])
          expect(settled).toEqual([
            { charged: 0, refunded: 8, uncharged: 0 },
            { charged: 0, refunded: 0, uncharged: 0 },
          ])
          expect(await remaining()).toBe(8)
        },
      )
    }

    for (const [name, make] of SETTLE_RULES) {
      it(
        '%s: settle and refund racing give the result back once, in either order'.replace('%s', name),
        async () => {
          // Settle first: 4 come back, and the refund gives back the 4 the settle left charged.
          const first = await twoUsedAndEight(make)
          await Promise.all([first.limiter.settle(first.result, 4), first.limiter.refund(first.result)])
          expect(await first.remaining()).toBe(8)
          // Refund first: all 8 come back, and the settle has nothing left to settle.
          const second = await twoUsedAndEight(make)
          const [, settled] = await Promise.all([
            second.limiter.refund(second.result),
            second.limiter.settle(second.result, 0),
          ])
          expect(settled).toEqual({ charged: 0, refunded: 0, uncharged: 0 })
          expect(await second.remaining()).toBe(8)
          // Once over: another refund or settle gives back nothing more.
          await second.limiter.refund(second.result)
          await second.limiter.settle(second.result, 0)
          expect(await second.remaining()).toBe(8)
        },
      )
    }

    for (const [name, make] of SETTLE_RULES) {
      it(
        '%s: a refund after a completed settle gives back the settled cost, once'.replace('%s', name),
        async () => {
          const { limiter, result, remaining } = await twoUsedAndEight(make)
          expect(await limiter.settle(result, 3)).toEqual({ charged: 0, refunded: 5, uncharged: 0 })
          expect(await remaining()).toBe(5)
          await limiter.refund(result)
          expect(await remaining()).toBe(8)
          await limiter.refund(result)
          expect(await remaining()).toBe(8)
        },
      )
    }

    it('several rules: the charge is what leaves no rule more than its limit past it; a denied result settles nothing', async () => {
      const { limiter } = await setup([
        fixedWindow({ limit: 10, window: '1h' }),
        slidingWindowLog({ limit: 4, window: '1m' }),
      ])
      const result = await limiter.limit('k')
      // The log, 1 used of 4, may owe 4 more: 7 charged, leaving the fixed window at 8 of 10.
      expect(await limiter.settle(result, 9)).toEqual({ charged: 7, refunded: 0, uncharged: 1 })
      expect((await limiter.peek('k', { cost: 0 })).rules.map((rule) => rule.remaining)).toEqual([2, 0])
      const denied = await limiter.limit('k')
      expect(await limiter.settle(denied, 3)).toEqual({ charged: 0, refunded: 0, uncharged: 2 })
    })

    it('charges and the decisions after them equal the reference model: the largest cost leaving each rule at most its limit past it', async () => {
      await fc.assert(
        fc.asyncProperty(
          traceArbitrary(),
          fc.array(fc.integer({ min: 0, max: 8 }), { minLength: 40, maxLength: 40 }),
          async ({ rules: specs, steps }, extras) => {
            const rules = specs.map(buildRule)
            const { clock, limiter } = await setup(rules, 1_700_000_000_000)
            const histories = new Map<string, Admission[][]>()
            for (const [i, step] of steps.entries()) {
              clock.advance(step.delay)
              const history = histories.get(step.key) ?? rules.map(() => [])
              histories.set(step.key, history)
              const expected = decide(rules, history, clock.now, step.cost, true)
              const result = await limiter.limit(step.key, { cost: step.cost })
              expect(result.allowed).toBe(expected.allowed)
              // Truthful while a rule owes units: nothing left, and the wait until the request fits again.
              expect(result.retryAfter).toBe(expected.retryAfter)
              expect(result.rules.map((rule) => rule.remaining)).toEqual(expected.remaining)
              expect(result.rules.map((rule) => rule.reset)).toEqual(expected.reset)
              if (!result.allowed) continue
              const extra = extras[i]!
              let k = extra
              // The default `maxDebt`: each rule may owe its own limit.
              const leaves = (k: number) =>
                rules.every((rule, r) => fits(rule, history[r]!, clock.now, k - rule.limit))
              while (k > 0 && !leaves(k)) k--
              if (k > 0) for (const h of history) h.push({ time: clock.now, cost: k })
              const settled = await limiter.settle(result, step.cost + extra)
              expect(settled).toEqual({ charged: k, refunded: 0, uncharged: extra - k })
            }
          },
        ),
        { numRuns },
      )
    })
  })
}
