import {
  fixedWindow,
  gcra,
  type PenaltyOptions,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import fc from 'fast-check'
import { buildRule, reservationArbitrary, time, traceArbitrary } from './conformance/arbitraries.js'
import { MINUTE, nextPrefix, SECOND, suiteContext } from './conformance/context.js'
import type { StoreUnderTest, TestFunctions } from './conformance/types.js'
import { PenaltyReference, type PenaltySpec } from './penalty-reference.js'
import { type Admission, decide, fits, reserve } from './reference.js'

export type { Expect, StoreUnderTest, TestFunctions } from './conformance/types.js'

/**
 * Registers the store conformance suite (the one MemoryStore and RedisStore pass) with the caller's test runner:
 * worked examples of every algorithm, penalties, reserve-then-settle, boundaries, a clock that steps back,
 * refunds, and properties over random traces checked against a naive reference model. A store that passes it
 * decides exactly as ratewindow's own stores do.
 * @example
 * import { describe, expect, it } from 'vitest'
 * describeStoreConformance({ describe, it, expect }, { name: 'MyStore', createStore: (clock) => new MyStore({ clock: clock.read }) })
 */
export function describeStoreConformance(test: TestFunctions, subject: StoreUnderTest): void {
  const { describe, it, each, expect, numRuns, setup } = suiteContext(test, subject)

  describe(`${subject.name}: worked examples from the reference articles`, () => {
    it('article 000 (log, 10 per 60 s): allowed with 9 and 8 left, the 11th denied until the oldest leaves', async () => {
      const t0 = 1_700_000_040_000 - (1_700_000_040_000 % MINUTE)
      const { clock, limiter } = await setup(slidingWindowLog({ limit: 10, window: '60s' }), t0)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 9 })
      clock.set(t0 + 5 * SECOND)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 8 })
      for (let i = 3; i <= 10; i++) {
        clock.set(t0 + 5 * SECOND + (i - 2) * 500) // requests 3..10, "made quickly", before t = 10 s
        expect((await limiter.limit('k')).allowed).toBe(true)
      }
      clock.set(t0 + 10 * SECOND)
      expect(await limiter.limit('k')).toMatchObject({
        allowed: false,
        remaining: 0,
        retryAfter: 50 * SECOND,
      })
      // NOTE: the article says that at t = 40 s requests 1-4 have expired and 6 remain. With a 60 s window nothing
      // sent at t >= 0 has left by t = 40 s (the oldest leaves at t = 60 s), so the correct answer is: still
      // 10 in the window, denied, retry in 20 s.
      clock.set(t0 + 40 * SECOND)
      expect(await limiter.limit('k')).toMatchObject({
        allowed: false,
        remaining: 0,
        retryAfter: 20 * SECOND,
      })
      // Half-open window: at exactly t = 60 s request 1 has left, so one more passes.
      clock.set(t0 + 60 * SECOND - 1)
      expect((await limiter.limit('k')).allowed).toBe(false)
      clock.set(t0 + 60 * SECOND)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 0 })
    })

    it('article 001 (log, 5 per 60 s): a denial reports when the oldest entry leaves, not the window size', async () => {
      const base = 1_700_000_100_000
      const { clock, limiter } = await setup(slidingWindowLog({ limit: 5, window: '60s' }), base)
      for (const offset of [0, 15_000, 30_000, 40_000, 50_000]) {
        clock.set(base + offset)
        expect((await limiter.limit('alice')).allowed).toBe(true)
      }
      clock.set(base + 55_000)
      const denied = await limiter.limit('alice')
      expect(denied).toMatchObject({ allowed: false, remaining: 0 })
      expect(denied.retryAfter).toBe(5_000) // the entry at +0 leaves at +60 s; the article would say 60 s
    })

    it('article 002 (log, 5 per 60 s): at 3720 the entry at 3650 is pruned, 3 remain, the request passes', async () => {
      const { clock, limiter } = await setup(slidingWindowLog({ limit: 5, window: '60s' }), 0)
      for (const second of [3650, 3680, 3695, 3710]) {
        clock.set(second * SECOND)
        expect((await limiter.limit('user')).allowed).toBe(true)
      }
      clock.set(3720 * SECOND)
      const result = await limiter.limit('user')
      // Three entries survive (3680, 3695, 3710); with 3720 added, the list holds four: one more fits.
      expect(result).toMatchObject({ allowed: true, remaining: 1 })
      expect(result.reset).toBe(60 * SECOND) // the whole quota is free once 3720 leaves
      const full = await limiter.limit('user')
      expect(full).toMatchObject({ allowed: true, remaining: 0 })
      // Denied now; the oldest counted entry (3680) leaves at 3740.
      expect(await limiter.limit('user')).toMatchObject({ allowed: false, retryAfter: 20 * SECOND })
    })

    it('article 003 (fixed window): 100 at the end of one window and 100 at the start of the next all pass', async () => {
      const { clock, limiter } = await setup(fixedWindow({ limit: 100, window: '1m' }), 30 * MINUTE)
      let admitted = 0
      for (let i = 0; i < 100; i++) {
        clock.set(31 * MINUTE - SECOND + i * 10) // the last second of the 12:00-12:01 window
        if ((await limiter.limit('k')).allowed) admitted++
      }
      for (let i = 0; i < 100; i++) {
        clock.set(31 * MINUTE + i * 10) // the first second of the next window
        if ((await limiter.limit('k')).allowed) admitted++
      }
      expect(admitted).toBe(200) // 2 × limit within two seconds: the documented flaw
    })

    it('article 003 (counter, 100 per minute): prev 80, curr 30, 30 s in: estimate 70, allowed', async () => {
      const { clock, limiter } = await setup(slidingWindowCounter({ limit: 100, window: '1m' }), 4 * MINUTE)
      for (let i = 0; i < 80; i++) expect((await limiter.limit('k')).allowed).toBe(true)
      clock.set(5 * MINUTE + 15 * SECOND) // 80 × 0.75 = 60 counted from the previous window: 30 more fit
      for (let i = 0; i < 30; i++) expect((await limiter.limit('k')).allowed).toBe(true)
      clock.set(5 * MINUTE + 30 * SECOND)
      // 80 × 0.5 + 30 = 70 before; this request makes 71, so 29 more cost-1 requests fit.
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 29 })
    })

    it('article 003 (counter): traffic back-loaded in the previous window is under-counted, within the bound', async () => {
      const { clock, limiter } = await setup(slidingWindowCounter({ limit: 100, window: '1m' }), 0)
      clock.set(MINUTE - 10 * SECOND) // all 100 in the last 10 s of the previous window
      for (let i = 0; i < 100; i++) expect((await limiter.limit('k', { cost: 1 })).allowed).toBe(true)
      clock.set(MINUTE + 30 * SECOND) // 50 % into the current window: estimate 100 × 0.5 = 50
      let admitted = 0
      while ((await limiter.limit('k')).allowed) admitted++
      expect(admitted).toBe(50)
      // The trailing minute (30 s, 90 s] now holds 150: the documented bound is limit + prev × elapsed / W.
    })

    it('article 004 (counter, 7 per minute): prev 5, curr 3, 30 s in: allowed, then denied (no floor)', async () => {
      const { clock, limiter } = await setup(slidingWindowCounter({ limit: 7, window: '1m' }), 0)
      for (let i = 0; i < 5; i++) await limiter.limit('k')
      clock.set(MINUTE + 20 * SECOND) // 5 × 40/60 ≈ 3.3 from the previous window: 3 more fit
      for (let i = 0; i < 3; i++) expect((await limiter.limit('k')).allowed).toBe(true)
      clock.set(MINUTE + 30 * SECOND)
      // 3 + 5 × 0.5 = 5.5; with this request 6.5 <= 7: allowed, and no whole request fits after it.
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 0 })
      // The article's floor(6.5) = 6 < 7 would admit a 5th, making the estimate 7.5 > 7. We deny it, and the
      // truthful wait is 6 s (5 × (30 − 6) / 60 + 5 = 7), not the article's "end of the window".
      expect(await limiter.limit('k')).toMatchObject({ allowed: false, retryAfter: 6 * SECOND })
      clock.advance(6 * SECOND - 1)
      expect((await limiter.peek('k')).allowed).toBe(false)
      clock.advance(1)
      expect((await limiter.peek('k')).allowed).toBe(true)
    })

    it('token bucket: a burst of capacity, then the refill rate', async () => {
      const { clock, limiter } = await setup(tokenBucket({ capacity: 10, refillRate: 1, interval: '1s' }))
      for (let i = 9; i >= 0; i--)
        expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: i })
      expect(await limiter.limit('k')).toMatchObject({ allowed: false, retryAfter: 1000, reset: 10_000 })
      clock.advance(2_500)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 1 })
      // 1.5 tokens left: a cost-2 request misses half a token, 500 ms of refill.
      expect(await limiter.limit('k', { cost: 2 })).toMatchObject({ allowed: false, retryAfter: 500 })
    })
  })

  describe(`${subject.name}: GCRA`, () => {
    it('10 per second with bursts of 3: a burst, then one every 100 ms, each wait exact', async () => {
      const { clock, limiter } = await setup(gcra({ limit: 10, window: '1s', burst: 3 }))
      for (const remaining of [2, 1, 0])
        expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining })
      // The TAT is 300 ms ahead; a request fits once it is at most 200 ms ahead.
      expect(await limiter.limit('k')).toMatchObject({
        allowed: false,
        retryAfter: 100,
        reset: 300,
        limit: 3,
      })
      clock.advance(99)
      expect((await limiter.limit('k')).allowed).toBe(false)
      clock.advance(1)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 0 })
      // A cost-2 request needs 200 ms of room.
      expect(await limiter.limit('k', { cost: 2 })).toMatchObject({ allowed: false, retryAfter: 200 })
    })

    it('a rate that does not divide the window stays exact: 3 per second spaces requests 333⅓ ms apart', async () => {
      const { clock, limiter } = await setup(gcra({ limit: 3, window: '1s', burst: 2 }), 1_700_000_000_000)
      const admittedAt: number[] = []
      while (admittedAt.length < 11) {
        const result = await limiter.limit('k')
        if (result.allowed) admittedAt.push(clock.now - 1_700_000_000_000)
        else clock.advance(result.retryAfter)
      }
      // A burst of 2, then one per 333⅓ ms by the schedule, not by the rounded-up arrivals: 3 per second exactly.
      expect(admittedAt).toEqual([0, 0, 334, 667, 1000, 1334, 1667, 2000, 2334, 2667, 3000])
    })

    it('a refund gives back a recent request, and nothing once a whole burst time has passed', async () => {
      const { clock, limiter } = await setup(gcra({ limit: 3, window: '1s' }))
      const first = []
      for (let i = 0; i < 3; i++) first.push(await limiter.limit('k'))
      clock.advance(1_000) // rested
      const second = []
      for (let i = 0; i < 3; i++) second.push(await limiter.limit('k'))
      for (const result of first) await limiter.refund(result)
      expect(await limiter.peek('k')).toMatchObject({ allowed: false, remaining: 0 })
      clock.advance(10)
      await limiter.refund(second[2]!)
      expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 1 }) // free now (issue 20)
    })

    it('a clock stepping back neither rests the key nor forgets it', async () => {
      const { clock, limiter } = await setup(gcra({ limit: 3, window: '1s' }), 1_700_000_000_000)
      let admitted = 0
      for (const step of [0, -5, 3, -2]) {
        clock.advance(step)
        for (let i = 0; i < 3; i++) if ((await limiter.limit('k')).allowed) admitted++
      }
      expect(admitted).toBe(3)
    })
  })

  describe(`${subject.name}: penalties`, () => {
    const penalty: PenaltyOptions = { after: 3, within: '10s', block: '5s', factor: 2, maxBlock: '15s' }

    it('three denials within 10 s block the key for 5 s, then 10 s, then 15 s (the cap); reset clears it', async () => {
      const { clock, limiter } = await setup(fixedWindow({ limit: 2, window: '1s' }), 1_700_000_000_000, {
        penalty,
      })
      const blockAfterDenials = async () => {
        expect((await limiter.limit('k')).allowed).toBe(true)
        expect((await limiter.limit('k')).allowed).toBe(true)
        expect(await limiter.limit('k')).toMatchObject({ allowed: false, retryAfter: 1_000 })
        expect((await limiter.limit('k')).blocked).toBeUndefined()
        return limiter.limit('k')
      }
      expect(await blockAfterDenials()).toMatchObject({ allowed: false, blocked: 5_000, retryAfter: 5_000 })
      // The window has rolled over, but the block holds, with a truthful wait.
      clock.advance(3_000)
      expect(await limiter.limit('k')).toMatchObject({
        allowed: false,
        blocked: 2_000,
        retryAfter: 2_000,
        remaining: 0,
      })
      expect(await limiter.peek('k')).toMatchObject({ allowed: false, blocked: 2_000 })
      clock.advance(1_999)
      expect((await limiter.peek('k')).allowed).toBe(false)
      clock.advance(1)
      // Blocked again within 5 s of the block's end: twice as long.
      expect(await blockAfterDenials()).toMatchObject({ blocked: 10_000, retryAfter: 10_000 })
      clock.advance(10_000)
      expect(await blockAfterDenials()).toMatchObject({ blocked: 15_000 })
      clock.advance(15_000)
      expect(await blockAfterDenials()).toMatchObject({ blocked: 15_000 })
      await limiter.reset('k')
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 1 })
      expect((await limiter.peek('k')).blocked).toBeUndefined()
    })

    it('the escalation lapses once the key has behaved for as long as its last block', async () => {
      // Requests half-way into each 1 s window: a window key on Redis lives long enough in real time too.
      const { clock, limiter } = await setup(fixedWindow({ limit: 1, window: '1s' }), 1_700_000_000_500, {
        penalty: { after: 1, within: '1s', block: '2s', factor: 3, maxBlock: '1h' },
      })
      await limiter.limit('k')
      expect(await limiter.limit('k')).toMatchObject({ blocked: 2_000 })
      clock.advance(2_000 + 2_000) // ended 2 s ago: as long as the block
      await limiter.limit('k')
      expect(await limiter.limit('k')).toMatchObject({ blocked: 2_000 })
      clock.advance(2_000 + 1_999)
      await limiter.limit('k')
      expect(await limiter.limit('k')).toMatchObject({ blocked: 6_000 })
    })

    it('denials spread wider than `within` never block; other keys and limiters are untouched', async () => {
      const { clock, limiter } = await setup(fixedWindow({ limit: 1, window: '1s' }), 1_700_000_000_000, {
        penalty: { after: 2, within: '1s', block: '1m' },
      })
      for (let i = 0; i < 5; i++) {
        await limiter.limit('k')
        expect((await limiter.limit('k')).blocked).toBeUndefined()
        clock.advance(1_000)
      }
      expect((await limiter.limit('other')).allowed).toBe(true)
    })

    it('every decision equals the naive penalty model over random traces', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            limit: fc.integer({ min: 1, max: 3 }),
            window: time(1, 5),
            after: fc.integer({ min: 1, max: 3 }),
            within: time(1, 20),
            block: time(1, 20),
            factor: fc.integer({ min: 1, max: 3 }),
            extra: fc.integer({ min: 0, max: 40 }),
          }),
          fc.array(
            fc.record({
              delay: fc.oneof(fc.constant(0), time(0, 3), time(0, 40)),
              cost: fc.integer({ min: 0, max: 1 }),
              action: fc.constantFrom('limit', 'limit', 'limit', 'peek', 'reset'),
            }),
            { minLength: 1, maxLength: 40 },
          ),
          async (spec, steps) => {
            const rule = fixedWindow({ limit: spec.limit, window: spec.window })
            const pen: PenaltySpec = {
              after: spec.after,
              within: spec.within,
              block: spec.block,
              factor: spec.factor,
              maxBlock: spec.block + spec.extra * 1_000,
            }
            const { clock, limiter } = await setup(rule, 1_700_000_000_000, {
              penalty: { ...pen, maxBlock: pen.maxBlock },
            })
            const reference = new PenaltyReference(pen)
            let history: Admission[][] = [[]]
            for (const step of steps) {
              clock.advance(step.delay)
              if (step.action === 'reset') {
                await limiter.reset('k')
                reference.reset()
                history = [[]]
                continue
              }
              const write = step.action === 'limit'
              let blocked = reference.blockedAt(clock.now)
              const rules = decide([rule], history, clock.now, step.cost, write && blocked === 0)
              const allowed = rules.allowed && blocked === 0
              if (!allowed && blocked === 0 && write) blocked = reference.deny(clock.now)
              const result = write
                ? await limiter.limit('k', { cost: step.cost })
                : await limiter.peek('k', { cost: step.cost })
              expect(result.allowed).toBe(allowed)
              expect(result.blocked ?? 0).toBe(blocked)
              expect(result.retryAfter).toBe(allowed ? 0 : Math.max(rules.retryAfter, blocked))
            }
          },
        ),
        { numRuns },
      )
    })
  })

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

  describe(`${subject.name}: boundaries`, () => {
    it('the log admits exactly `limit` in every window across a boundary burst', async () => {
      const { clock, limiter } = await setup(slidingWindowLog({ limit: 100, window: '1m' }), 0)
      let admitted = 0
      for (let i = 0; i < 200; i++) {
        clock.set(MINUTE - SECOND + i * 10)
        if ((await limiter.limit('k')).allowed) admitted++
      }
      expect(admitted).toBe(100)
    })

    it('the counter admits far less than 2 × limit across a boundary burst', async () => {
      const { clock, limiter } = await setup(slidingWindowCounter({ limit: 100, window: '1m' }), 0)
      let admitted = 0
      for (let i = 0; i < 200; i++) {
        clock.set(MINUTE - SECOND + i * 10)
        if ((await limiter.limit('k')).allowed) admitted++
      }
      // 100 before the boundary; 1 s after it the estimate is 100 × 59/60 + curr, so curr <= 1.
      expect(admitted).toBe(101)
    })

    it('a request exactly `window` after an entry sees it gone; 1 ms earlier it does not', async () => {
      for (const rule of [
        slidingWindowLog({ limit: 1, window: 1000 }),
        fixedWindow({ limit: 1, window: 1000 }),
      ]) {
        const { clock, limiter } = await setup(rule, 5_000)
        expect((await limiter.limit('k')).allowed).toBe(true)
        clock.advance(999)
        expect((await limiter.peek('k')).allowed).toBe(false)
        clock.advance(1)
        expect((await limiter.peek('k')).allowed).toBe(true)
      }
    })
  })

  describe(`${subject.name}: time that steps back`, () => {
    each([
      ['fixed window', () => fixedWindow({ limit: 3, window: '1s' })],
      ['sliding window counter', () => slidingWindowCounter({ limit: 3, window: '1s' })],
    ])(
      '%s: a clock stepping back 2 ms across a boundary neither resets nor starts a window',
      async (_, make) => {
        const start = 1_700_000_000_000 // a multiple of the 1 s window
        const { clock, limiter } = await setup(make(), start)
        let admitted = 0
        for (const time of [start, start - 2, start + 1]) {
          clock.set(time)
          for (let i = 0; i < 3; i++) if ((await limiter.limit('k')).allowed) admitted++
        }
        expect(admitted).toBe(3) // once the limit, not three times (fixed) or twice (counter)
        clock.set(start - 2)
        const denied = await limiter.limit('k')
        expect(denied.allowed).toBe(false)
        // The wait is counted from the clock as it reads now: truthful once it moves on.
        clock.set(start - 2 + denied.retryAfter - 1)
        expect((await limiter.peek('k')).allowed).toBe(false)
        clock.set(start - 2 + denied.retryAfter)
        expect((await limiter.peek('k')).allowed).toBe(true)
      },
    )

    it('token bucket and log: a clock stepping back neither refills nor forgets', async () => {
      for (const rule of [
        tokenBucket({ capacity: 3, refillRate: 1, interval: '1s' }),
        slidingWindowLog({ limit: 3, window: '1s' }),
      ]) {
        const { clock, limiter } = await setup(rule, 1_700_000_000_000)
        let admitted = 0
        for (const step of [0, -5, 3, -2]) {
          clock.advance(step)
          for (let i = 0; i < 3; i++) if ((await limiter.limit('k')).allowed) admitted++
        }
        expect(admitted).toBe(3)
      }
    })
  })

  describe(`${subject.name}: refunds honour when the request was made`, () => {
    it('token bucket: a refund after the bucket refilled gives nothing back; a prompt one gives it all', async () => {
      const { clock, limiter } = await setup(tokenBucket({ capacity: 3, refillRate: 3, interval: '1s' }))
      const first = []
      for (let i = 0; i < 3; i++) first.push(await limiter.limit('k'))
      clock.advance(1_000) // full again
      const second = []
      for (let i = 0; i < 3; i++) second.push(await limiter.limit('k'))
      expect([...first, ...second].every((result) => result.allowed)).toBe(true)
      for (const result of first) await limiter.refund(result) // made before the refill: already refilled
      expect(await limiter.peek('k')).toMatchObject({ allowed: false, remaining: 0 })
      clock.advance(10)
      await limiter.refund(second[2]!) // made after the bucket was last full: given back
      expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 1 }) // free now (issue 20)
    })
  })

  describe(`${subject.name}: several rules, peek, reset, refund`, () => {
    it('a request denied by one rule consumes from none', async () => {
      const { clock, limiter } = await setup([
        slidingWindowCounter({ limit: 2, window: '1s' }),
        fixedWindow({ limit: 3, window: '1h' }),
      ])
      expect((await limiter.limit('k')).allowed).toBe(true)
      expect((await limiter.limit('k')).allowed).toBe(true)
      const denied = await limiter.limit('k')
      expect(denied.allowed).toBe(false)
      expect(denied.rules.map((rule) => rule.allowed)).toEqual([false, true])
      expect(denied.rules[1]!.remaining).toBe(1) // the hourly rule did not pay for the denied request
      clock.advance(2_000)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 0, limit: 3 })
      const blocked = await limiter.limit('k')
      expect(blocked.allowed).toBe(false)
      expect(blocked.rule.windowMs).toBe(3_600_000)
    })

    it('peek reports without consuming; reset forgets; refund gives back', async () => {
      const { limiter } = await setup(slidingWindowLog({ limit: 2, window: '1m' }))
      // peek reports the units free now (issue 20), and consumes nothing
      expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 2 })
      expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 2 })
      const first = await limiter.limit('k')
      await limiter.limit('k')
      expect((await limiter.peek('k')).allowed).toBe(false)
      await limiter.refund(first)
      expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 1 })
      await limiter.reset('k')
      expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 2, reset: 0 }) // a fresh key: all free
    })

    it('keys are independent', async () => {
      const { limiter } = await setup(fixedWindow({ limit: 1, window: '1m' }))
      expect((await limiter.limit('a')).allowed).toBe(true)
      expect((await limiter.limit('b')).allowed).toBe(true)
      expect((await limiter.limit('a')).allowed).toBe(false)
    })
  })

  describe(`${subject.name}: reservations (delay, wait)`, () => {
    /** The store's reserving consume, or undefined for a store that does not reserve (the tests then pass). */
    async function reserving(rules: Rule[]) {
      const { clock, store } = await setup(rules, 1_700_000_000_000)
      if (subject.reserves === true) expect(store.reservations).toBe(true)
      if (store.reservations !== true) return undefined
      const prefix = nextPrefix()
      const consume = (key: string, cost: number, within: number) =>
        Promise.resolve(store.consume({ prefix, key, rules, cost, reserve: within }))
      const refund = (key: string, cost: number, at: number) =>
        Promise.resolve(store.refund({ prefix, key, rules, cost, at }))
      return { clock, store, consume, refund }
    }

    it('every reserved slot (and every decision) equals the reference model', async () => {
      await fc.assert(
        fc.asyncProperty(reservationArbitrary(), async ({ rules: specs, steps }) => {
          const rules = specs.map(buildRule)
          const subject = await reserving(rules)
          if (subject === undefined) return
          const histories = new Map<string, Admission[][]>()
          for (const step of steps) {
            subject.clock.advance(step.delay)
            const history = histories.get(step.key) ?? rules.map(() => [])
            histories.set(step.key, history)
            const expected = reserve(rules, history, subject.clock.now, step.cost, step.reserve)
            const decision = await subject.consume(step.key, step.cost, step.reserve)
            expect({ allowed: decision.allowed, wait: decision.wait ?? 0 }).toEqual({
              allowed: expected.allowed,
              wait: expected.wait,
            })
            expect(decision.outcomes.map((outcome) => outcome.remaining)).toEqual(expected.remaining)
            expect(decision.outcomes.map((outcome) => outcome.reset)).toEqual(expected.reset)
            if (!decision.allowed)
              expect(Math.max(...decision.outcomes.map((o) => o.retryAfter))).toBe(expected.retryAfter)
          }
        }),
        { numRuns },
      )
    })

    it('reservations made concurrently (grouped by RedisStore) equal the reference model in arrival order', async () => {
      await fc.assert(
        fc.asyncProperty(
          reservationArbitrary(),
          fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 10 }),
          async ({ rules: specs, steps }, bursts) => {
            const rules = specs.map(buildRule)
            const subject = await reserving(rules)
            if (subject === undefined) return
            const histories = new Map<string, Admission[][]>()
            let next = 0
            for (let b = 0; next < steps.length; b++) {
              const burst = steps.slice(next, next + bursts[b % bursts.length]!)
              next += burst.length
              const expected: ReturnType<typeof reserve>[] = []
              const sent = burst.map((step) => {
                subject.clock.advance(step.delay)
                const history = histories.get(step.key) ?? rules.map(() => [])
                histories.set(step.key, history)
                expected.push(reserve(rules, history, subject.clock.now, step.cost, step.reserve))
                return subject.consume(step.key, step.cost, step.reserve)
              })
              const decisions = await Promise.all(sent)
              decisions.forEach((decision, i) => {
                expect({ allowed: decision.allowed, wait: decision.wait ?? 0 }).toEqual({
                  allowed: expected[i]!.allowed,
                  wait: expected[i]!.wait,
                })
                expect(decision.outcomes.map((outcome) => outcome.remaining)).toEqual(expected[i]!.remaining)
              })
            }
          },
        ),
        { numRuns: Math.max(1, Math.ceil(numRuns / 2)) },
      )
    })

    each([
      ['sliding window log', () => slidingWindowLog({ limit: 1, window: '30s' })],
      ['token bucket', () => tokenBucket({ capacity: 1, refillRate: 1, interval: '30s' })],
      ['GCRA', () => gcra({ limit: 1, window: '30s' })],
    ])('%s: slots follow one another, and a slot given back is the next one reserved', async (_, make) => {
      const subject = await reserving([make()])
      if (subject === undefined) return
      const { clock, consume, refund } = subject
      const start = clock.now
      expect(await consume('k', 1, 0)).toMatchObject({ allowed: true })
      expect(await consume('k', 1, 0)).toMatchObject({ allowed: false })
      expect((await consume('k', 1, 60_000)).wait).toBe(30_000)
      const second = await consume('k', 1, 60_000)
      expect(second.wait).toBe(60_000)
      // Beyond the longest wait: denied, nothing reserved.
      expect(await consume('k', 1, 60_000)).toMatchObject({ allowed: false })
      clock.advance(10_000)
      // Given back (an abort while waiting): the next reservation takes the same slot.
      await refund('k', 1, second.now + second.wait!)
      expect((await consume('k', 1, 60_000)).wait).toBe(start + 60_000 - clock.now)
      expect(await consume('k', 1, 60_000)).toMatchObject({ allowed: false })
    })

    each([
      ['fixed window', () => fixedWindow({ limit: 1, window: '1m' })],
      ['sliding window counter', () => slidingWindowCounter({ limit: 1, window: '1m' })],
    ])('%s cannot reserve: over the limit it is denied as without a wait', async (_, make) => {
      const subject = await reserving([make()])
      if (subject === undefined) return
      expect(await subject.consume('k', 1, 3_600_000)).toMatchObject({ allowed: true })
      const denied = await subject.consume('k', 1, 3_600_000)
      expect({ allowed: denied.allowed, wait: denied.wait }).toEqual({ allowed: false, wait: undefined })
    })
  })

  describe(`${subject.name}: properties over random traces`, () => {
    it('every decision equals the naive reference model', async () => {
      await fc.assert(
        fc.asyncProperty(traceArbitrary(), async ({ rules: specs, steps }) => {
          const rules = specs.map(buildRule)
          const { clock, limiter } = await setup(rules, 1_700_000_000_000)
          const histories = new Map<string, Admission[][]>()
          for (const step of steps) {
            clock.advance(step.delay)
            const history = histories.get(step.key) ?? rules.map(() => [])
            histories.set(step.key, history)
            const expected = decide(rules, history, clock.now, step.cost, step.action === 'limit')
            const result =
              step.action === 'limit'
                ? await limiter.limit(step.key, { cost: step.cost })
                : await limiter.peek(step.key, { cost: step.cost })
            expect(result.allowed).toBe(expected.allowed)
            expect(result.retryAfter).toBe(expected.retryAfter)
            expect(result.rules.map((rule) => rule.remaining)).toEqual(expected.remaining)
            expect(result.rules.map((rule) => rule.reset)).toEqual(expected.reset)
            expect(result.remaining).toBe(Math.min(...expected.remaining))
          }
        }),
        { numRuns },
      )
    })

    it('decisions made concurrently (grouped by RedisStore) equal the reference model in arrival order', async () => {
      await fc.assert(
        fc.asyncProperty(
          traceArbitrary(),
          fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 20 }),
          fc.array(fc.boolean(), { minLength: 1, maxLength: 7 }),
          async ({ rules: specs, steps }, bursts, turns) => {
            const rules = specs.map(buildRule)
            const { clock, limiter } = await setup(rules, 1_700_000_000_000)
            const histories = new Map<string, Admission[][]>()
            // The trace in bursts: each burst is sent without waiting for answers (each step read its own time when
            // sent), so that the steps after the first wait and go together; some steps end the event loop's turn, so
            // that several groups are in flight at once. The reference decides them one by one, in order.
            let next = 0
            for (let b = 0; next < steps.length; b++) {
              const burst = steps.slice(next, next + bursts[b % bursts.length]!)
              next += burst.length
              const expected: ReturnType<typeof decide>[] = []
              const sent: Promise<Awaited<ReturnType<typeof limiter.limit>>>[] = []
              for (const step of burst) {
                clock.advance(step.delay)
                const history = histories.get(step.key) ?? rules.map(() => [])
                histories.set(step.key, history)
                expected.push(decide(rules, history, clock.now, step.cost, step.action === 'limit'))
                sent.push(
                  step.action === 'limit'
                    ? limiter.limit(step.key, { cost: step.cost })
                    : limiter.peek(step.key, { cost: step.cost }),
                )
                if (turns[sent.length % turns.length]) await new Promise((resolve) => setImmediate(resolve))
              }
              const results = await Promise.all(sent)
              results.forEach((result, i) => {
                expect(result.source).toBe('store')
                expect(result.allowed).toBe(expected[i]!.allowed)
                expect(result.retryAfter).toBe(expected[i]!.retryAfter)
                expect(result.rules.map((rule) => rule.remaining)).toEqual(expected[i]!.remaining)
                expect(result.rules.map((rule) => rule.reset)).toEqual(expected[i]!.reset)
              })
            }
          },
        ),
        { numRuns },
      )
    })

    it('retryAfter is truthful: the same request passes at now + retryAfter, not 1 ms earlier', async () => {
      await fc.assert(
        fc.asyncProperty(traceArbitrary(), async ({ rules: specs, steps }) => {
          const rules = specs.map(buildRule)
          const { clock, limiter } = await setup(rules, 1_700_000_000_000)
          for (const step of steps) {
            clock.advance(step.delay)
            const result = await limiter.limit(step.key, { cost: step.cost })
            if (result.allowed) continue
            const now = clock.now
            clock.set(now + result.retryAfter - 1)
            expect((await limiter.peek(step.key, { cost: step.cost })).allowed).toBe(false)
            clock.set(now + result.retryAfter)
            expect((await limiter.peek(step.key, { cost: step.cost })).allowed).toBe(true)
            clock.set(now)
          }
        }),
        { numRuns },
      )
    })

    it('remaining is truthful: exactly that many cost-1 requests pass at once', async () => {
      await fc.assert(
        fc.asyncProperty(traceArbitrary(), async ({ rules: specs, steps }) => {
          const rules = specs.map(buildRule)
          const { clock, limiter } = await setup(rules, 1_700_000_000_000)
          for (const step of steps) {
            clock.advance(step.delay)
            await limiter.limit(step.key, { cost: step.cost })
          }
          const { remaining } = await limiter.peek('a', { cost: 0 })
          for (let i = 0; i < remaining; i++) expect((await limiter.limit('a')).allowed).toBe(true)
          expect((await limiter.limit('a')).allowed).toBe(false)
        }),
        { numRuns },
      )
    })

    it('the log never admits more than `limit` in any half-open window', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 6 }),
          time(10, 2_000),
          fc.array(
            fc.record({
              delay: fc.oneof(time(0, 700), fc.integer({ min: 0, max: 3 })),
              cost: fc.integer({ min: 0, max: 2 }),
            }),
            {
              maxLength: 60,
            },
          ),
          async (limit, window, steps) => {
            const { clock, limiter } = await setup(slidingWindowLog({ limit: Math.max(limit, 2), window }), 0)
            const admitted: Admission[] = []
            for (const step of steps) {
              clock.advance(step.delay)
              if ((await limiter.limit('k', { cost: step.cost })).allowed)
                admitted.push({ time: clock.now, cost: step.cost })
            }
            for (const end of admitted) {
              const inWindow = admitted.filter((a) => a.time > end.time - window && a.time <= end.time)
              expect(inWindow.reduce((sum, a) => sum + a.cost, 0)).toBeLessThanOrEqual(Math.max(limit, 2))
            }
          },
        ),
        { numRuns },
      )
    })
  })
}
