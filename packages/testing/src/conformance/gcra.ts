/** GCRA: bursts, exact spacing at rates that do not divide the window, refunds, a clock stepping back. */
import { gcra } from '@ratewindow/core'
import type { SuiteContext } from './context.js'

export function describeGcra(suite: SuiteContext): void {
  const { describe, expect, it, setup, subject } = suite
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
      expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 1 }) // free now
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
}
