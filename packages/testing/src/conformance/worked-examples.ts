/** Worked examples from the reference articles, one per algorithm, with the corrections the articles need. */
import { fixedWindow, slidingWindowCounter, slidingWindowLog, tokenBucket } from '@ratewindow/core'
import { MINUTE, SECOND, type SuiteContext } from './context.js'

export function describeWorkedExamples(suite: SuiteContext): void {
  const { describe, expect, it, setup, subject } = suite
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
}
