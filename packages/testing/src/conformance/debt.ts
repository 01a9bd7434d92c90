/**
 * Debt: a settle above the estimate is charged in full, and a rule taken past its limit owes the excess
 * until it has passed at the rule's rate (the fixed window carries it into the next windows, the sliding windows
 * keep it in their counts, the token bucket goes below zero, GCRA moves its TAT on), up to the limiter's `maxDebt`
 * and what the rule carries on the store (`debtOf` in the reference model): the rest is reported uncharged.
 */
import {
  fixedWindow,
  gcra,
  type RateLimiter,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { type Admission, charge, decide, usedOf } from '../reference.js'
import type { SuiteContext } from './context.js'

/** Each algorithm at 10 units a minute (the bucket's capacity, GCRA's burst: 10). */
const DEBT_RULES: (readonly [string, () => Rule])[] = [
  ['fixed window', () => fixedWindow({ limit: 10, window: '1m' })],
  ['sliding window log', () => slidingWindowLog({ limit: 10, window: '1m' })],
  ['sliding window counter', () => slidingWindowCounter({ limit: 10, window: '1m' })],
  ['token bucket', () => tokenBucket({ capacity: 10, refillRate: 10, interval: '1m' })],
  ['GCRA', () => gcra({ limit: 10, window: '1m' })],
]

/**
 * `oneWindow`: the store's fixed window counts keep two windows, so that it carries what one window counted beyond
 * the limit into the next one only (SyncedStore): the reference model charges it one limit of debt at most, and
 * none while a window carries a debt from the one before.
 */
export function describeDebt(suite: SuiteContext, oneWindow: boolean): void {
  const { describe, each, expect, setup, subject } = suite
  describe(`${subject.name}: debt (a settle above the estimate, charged in full)`, () => {
    /**
     * A request of cost 1 at the clock's time settled at `actual`: the settle's answer, checked against the reference
     * model's charge (with `maxDebt`, the limiter's), and the key's state checked against the model from then until
     * it passes again (refused 1 ms before its `retryAfter`). `history`: what the key was charged before.
     */
    async function owes(
      limiter: RateLimiter,
      clock: { now: number; advance(ms: number): void },
      rule: Rule,
      key: string,
      actual: number,
      maxDebt?: number,
      history: Admission[] = [],
    ) {
      const result = await limiter.limit(key)
      expect(result.allowed).toBe(true)
      history.push({ time: clock.now, cost: 1 })
      const settled = await limiter.settle(result, actual)
      const charged = charge([rule], [history], clock.now, actual - 1, maxDebt, oneWindow)
      expect(settled).toEqual({ charged, refunded: 0, uncharged: actual - 1 - charged })
      const expected = decide([rule], [history], clock.now, 1, false)
      // The settled result's waits follow the charge: the reset headers announce when a cost-1 request passes.
      expect(result).toMatchObject({ remaining: 0, reset: expected.reset[0] })
      expect(result.rules[0]).toMatchObject({ remaining: 0, next: expected.retryAfter })
      expect(await limiter.peek(key)).toMatchObject({
        allowed: false,
        remaining: 0,
        retryAfter: expected.retryAfter,
        reset: expected.reset[0],
      })
      // The log keeps its newest 2 × limit entries: what a decision needs (see its `DEBT_CAP`).
      const used = usedOf(rule, history, clock.now)
      const shown = rule.algorithm === 'sliding-window-log' ? Math.min(used, 2 * rule.limit) : used
      const inspected = await limiter.overrides.inspect(key)
      expect(inspected.rules[0]).toMatchObject({ used: shown, remaining: 0, nextFree: expected.retryAfter })
      clock.advance(expected.retryAfter - 1)
      expect((await limiter.peek(key)).allowed).toBe(false)
      clock.advance(1)
      expect((await limiter.limit(key)).allowed).toBe(true)
      history.push({ time: clock.now, cost: 1 })
      return settled
    }

    each(DEBT_RULES)(
      '%s: an underestimate is charged in full and owed: nothing passes, remaining 0, Retry-After and inspect truthful',
      async (_, make) => {
        const rule = make()
        const { clock, limiter } = await setup(rule)
        // 1 of 10 used: 19 more leave the rule 10 past its limit, the default `maxDebt` (one limit).
        expect(await owes(limiter, clock, rule, 'k', 20)).toEqual({ charged: 19, refunded: 0, uncharged: 0 })
      },
    )

    each(DEBT_RULES)(
      '%s: `maxDebt` bounds what a rule owes, the rest uncharged; the operator’s take charges only what it admits',
      async (_, make) => {
        const rule = make()
        const { clock, limiter } = await setup(rule)
        expect(await owes(limiter, clock, rule, 'a', 25)).toEqual({ charged: 19, refunded: 0, uncharged: 5 })
        expect((await limiter.limit('b')).allowed).toBe(true)
        expect(await limiter.overrides.take('b', 50)).toBe(9)
        expect(await limiter.peek('b', { cost: 0 })).toMatchObject({ allowed: true, remaining: 0 })
        const none = await setup(rule, clock.now, { maxDebt: 0 })
        const result = await none.limiter.limit('c', { cost: 4 })
        expect(await none.limiter.settle(result, 30)).toEqual({ charged: 6, refunded: 0, uncharged: 20 })
      },
    )

    each(DEBT_RULES)(
      '%s: a `maxDebt` above what the rule carries is uncharged beyond it (the sliding windows carry one limit)',
      async (_, make) => {
        const rule = make()
        // A debt of three windows: the fixed window carries it through them (one on SyncedStore), the bucket and
        // GCRA too; the sliding windows count a unit for one window, and carry one limit.
        const { clock, limiter } = await setup(rule, undefined, { maxDebt: 30 })
        await owes(limiter, clock, rule, 'd', 40, 30)
      },
    )

    each(DEBT_RULES)(
      '%s: a settle past the limit in two windows in a row charges what the rule carries',
      async (_, make) => {
        const rule = make()
        const { clock, limiter } = await setup(rule)
        const history: Admission[] = []
        // 6 owed; once it has passed, a second settle past the limit (a fixed window still carries the 6 in the
        // window after the one it was charged in, which SyncedStore's counts would not carry again).
        await owes(limiter, clock, rule, 'e', 16, undefined, history)
        clock.advance(decide([rule], [history], clock.now, 1, false).retryAfter)
        await owes(limiter, clock, rule, 'e', 30, undefined, history)
      },
    )
  })
}
