/** Properties over random traces, checked against the naive reference model. */
import { slidingWindowLog } from '@ratewindow/core'
import fc from 'fast-check'
import { type Admission, decide } from '../reference.js'
import { buildRule, time, traceArbitrary } from './arbitraries.js'
import type { SuiteContext } from './context.js'

export function describeProperties(suite: SuiteContext): void {
  const { describe, expect, it, numRuns, setup, subject } = suite
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
                if (subject.ordersTurns !== false && turns[sent.length % turns.length])
                  await new Promise((resolve) => setImmediate(resolve))
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
