/** Window boundaries: bursts across them, and half-open windows to the millisecond. */
import { fixedWindow, slidingWindowCounter, slidingWindowLog } from '@ratewindow/core'
import { MINUTE, SECOND, type SuiteContext } from './context.js'

export function describeBoundaries(suite: SuiteContext): void {
  const { describe, expect, it, setup, subject } = suite
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
}
