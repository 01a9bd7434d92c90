/** Refunds honour when the request was made. */
import { tokenBucket } from '@ratewindow/core'
import type { SuiteContext } from './context.js'

export function describeRefundTiming(suite: SuiteContext): void {
  const { describe, expect, it, setup, subject } = suite
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
      expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 1 }) // free now
    })
  })
}
