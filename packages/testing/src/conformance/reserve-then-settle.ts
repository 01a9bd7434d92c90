/** Reserve-then-settle: overestimates given back, underestimates charged, settle and refund once per result. */
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
      '%s: an overestimate is given back, an underestimate charged up to the quota left',
      async (_, make) => {
        const { limiter } = await setup(make())
        const first = await limiter.limit('k', { cost: 4 })
        expect(await limiter.settle(first, 1)).toEqual({ charged: 0, refunded: 3, uncharged: 0 })
        expect(first.cost).toBe(1)
        expect((await limiter.peek('k', { cost: 0 })).remaining).toBe(9)
        const second = await limiter.limit('k', { cost: 2 })
        expect(await limiter.settle(second, 5)).toEqual({ charged: 3, refunded: 0, uncharged: 0 })
        expect((await limiter.peek('k', { cost: 0 })).remaining).toBe(4)
        const third = await limiter.limit('k', { cost: 1 })
        expect(await limiter.settle(third, 50)).toEqual({ charged: 3, refunded: 0, uncharged: 46 })
        expect(await limiter.peek('k')).toMatchObject({ allowed: false, remaining: 0 })
        expect((await limiter.peek('k', { cost: 0 })).remaining).toBe(0)
        // A later refund gives back what is charged now, not the estimate.
        expect(third.cost).toBe(4)
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

    it('several rules: the charge is what every rule still admits; a denied result settles nothing', async () => {
      const { limiter } = await setup([
        fixedWindow({ limit: 10, window: '1h' }),
        slidingWindowLog({ limit: 4, window: '1m' }),
      ])
      const result = await limiter.limit('k')
      expect(await limiter.settle(result, 9)).toEqual({ charged: 3, refunded: 0, uncharged: 5 })
      expect((await limiter.peek('k', { cost: 0 })).rules.map((rule) => rule.remaining)).toEqual([6, 0])
      const denied = await limiter.limit('k')
      expect(await limiter.settle(denied, 3)).toEqual({ charged: 0, refunded: 0, uncharged: 2 })
    })

    it('charges equal the reference model: the largest cost every rule admits', async () => {
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
              if (!result.allowed) continue
              const extra = extras[i]!
              let k = extra
              while (k > 0 && !rules.every((rule, r) => fits(rule, history[r]!, clock.now, k))) k--
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
