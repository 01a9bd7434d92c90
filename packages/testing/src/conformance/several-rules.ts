/** Several rules on one key, peek, reset and refund. */
import { fixedWindow, slidingWindowCounter, slidingWindowLog } from '@ratewindow/core'
import type { SuiteContext } from './context.js'

export function describeSeveralRules(suite: SuiteContext): void {
  const { describe, expect, it, setup, subject } = suite
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
      // peek reports the units free now, and consumes nothing
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
}
