/**
 * Debt: a settle above the estimate is charged in full, and a rule taken past its limit owes the excess
 * until it has passed at the rule's rate (the fixed window carries it into the next windows, the sliding windows
 * keep it in their counts, the token bucket goes below zero, GCRA moves its TAT on), up to the limiter's `maxDebt`.
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
import { type Admission, decide, usedOf } from '../reference.js'
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
 * `beyondOneWindow`: also a `maxDebt` above the limit, a debt that outlasts the next window; a store that carries
 * a fixed window's debt one window only (SyncedStore: its shared counters keep two windows) leaves it out.
 */
export function describeDebt(suite: SuiteContext, beyondOneWindow: boolean): void {
  const { describe, each, expect, setup, subject } = suite
  describe(`${subject.name}: debt (a settle above the estimate, charged in full)`, () => {
    /**
     * A request of cost 1 at the clock's time settled at `actual`: the settle's answer, and the key's state checked
     * against the reference model from then until it passes again (refused 1 ms before its `retryAfter`).
     */
    async function owes(
      limiter: RateLimiter,
      clock: { now: number; advance(ms: number): void },
      rule: Rule,
      key: string,
      actual: number,
    ) {
      const result = await limiter.limit(key)
      expect(result.allowed).toBe(true)
      const settled = await limiter.settle(result, actual)
      const history: Admission[][] = [[{ time: clock.now, cost: 1 + settled.charged }]]
      const expected = decide([rule], history, clock.now, 1, false)
      expect(await limiter.peek(key)).toMatchObject({
        allowed: false,
        remaining: 0,
        retryAfter: expected.retryAfter,
        reset: expected.reset[0],
      })
      // The log keeps its newest 2 × limit entries: what a decision needs (see its `DEBT_CAP`).
      const used = usedOf(rule, history[0]!, clock.now)
      const shown = rule.algorithm === 'sliding-window-log' ? Math.min(used, 2 * rule.limit) : used
      const inspected = await limiter.overrides.inspect(key)
      expect(inspected.rules[0]).toMatchObject({ used: shown, remaining: 0, nextFree: expected.retryAfter })
      clock.advance(expected.retryAfter - 1)
      expect((await limiter.peek(key)).allowed).toBe(false)
      clock.advance(1)
      expect((await limiter.limit(key)).allowed).toBe(true)
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
        if (!beyondOneWindow) return
        // A debt of three windows: the fixed window carries it through them, the log keeps 2 × limit entries.
        const deep = await setup(rule, none.clock.now, { maxDebt: 30 })
        const settled = await owes(deep.limiter, deep.clock, rule, 'd', 40)
        expect(settled).toEqual({ charged: 39, refunded: 0, uncharged: 0 })
      },
    )
  })
}
