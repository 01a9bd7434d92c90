/** Penalties: blocks after repeated denials, their escalation and lapse, and the naive penalty model. */
import { fixedWindow, type PenaltyOptions } from '@ratewindow/core'
import fc from 'fast-check'
import { PenaltyReference, type PenaltySpec } from '../penalty-reference.js'
import { type Admission, decide } from '../reference.js'
import { time } from './arbitraries.js'
import type { SuiteContext } from './context.js'

export function describePenalties(suite: SuiteContext): void {
  const { describe, expect, it, numRuns, setup, subject } = suite
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
}
