/** A clock that steps back neither resets, starts, refills nor forgets. */
import { fixedWindow, slidingWindowCounter, slidingWindowLog, tokenBucket } from '@ratewindow/core'
import type { SuiteContext } from './context.js'

export function describeTimeThatStepsBack(suite: SuiteContext): void {
  const { describe, each, expect, it, setup, subject } = suite
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
}
