/** Reservations (delay, wait): reserved slots against the reference model, and the algorithms that cannot reserve. */
import {
  fixedWindow,
  gcra,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import fc from 'fast-check'
import { type Admission, reserve } from '../reference.js'
import { buildRule, reservationArbitrary } from './arbitraries.js'
import { nextPrefix, type SuiteContext } from './context.js'

export function describeReservations(suite: SuiteContext): void {
  const { describe, each, expect, it, numRuns, setup, subject } = suite
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
}
