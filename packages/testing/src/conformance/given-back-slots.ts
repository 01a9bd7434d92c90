/**
 * Reserved slots given back (an abort while waiting, a client that leaves a `delay`): never two calls on one slot.
 * GCRA and the token bucket keep one number per key, which cannot hold a gap: they give a slot back only while it
 * is the last one reserved. The sliding window log removes the exact entries.
 */
import { gcra, type Rule, slidingWindowLog, tokenBucket } from '@ratewindow/core'
import fc from 'fast-check'
import { type Admission, fits, giveBack, reserve } from '../reference.js'
import { buildRule, giveBackArbitrary } from './arbitraries.js'
import { nextPrefix, type SuiteContext } from './context.js'

/** A call that goes: at its slot (reserved) or at its decision (admitted at once). */
interface Call {
  time: number
  cost: number
}

/**
 * The first call of `calls` that a rule would have refused, given the calls before it in time, or undefined when
 * every rule admits them all: two calls on one slot show as one call too many.
 */
function overLimit(rules: readonly Rule[], calls: readonly Call[]): Call | undefined {
  const sorted = [...calls].sort((a, b) => a.time - b.time)
  for (const rule of rules) {
    const history: Admission[] = []
    for (const call of sorted) {
      if (!fits(rule, history, call.time, call.cost)) return call
      history.push(call)
    }
  }
  return undefined
}

export function describeGivenBackSlots(suite: SuiteContext): void {
  const { describe, each, expect, it, numRuns, setup, subject } = suite
  describe(`${subject.name}: reserved slots given back`, () => {
    /** The store's reserving consume and its refund, or undefined for a store that does not reserve. */
    async function reserving(rules: Rule[]) {
      const { clock, store } = await setup(rules, 1_700_000_000_000)
      if (store.reservations !== true) return undefined
      const prefix = nextPrefix()
      const consume = (key: string, cost: number, within: number) =>
        Promise.resolve(store.consume({ prefix, key, rules, cost, reserve: within }))
      const refund = (key: string, cost: number, at: number) =>
        Promise.resolve(store.refund({ prefix, key, rules, cost, at }))
      return { clock, consume, refund }
    }

    it('never two calls on one slot: whatever waiters leave, in any order, the calls left keep every rule', async () => {
      await fc.assert(
        fc.asyncProperty(giveBackArbitrary(), async ({ rules: specs, steps }) => {
          const rules = specs.map(buildRule)
          const subject = await reserving(rules)
          if (subject === undefined) return
          const { clock, consume, refund } = subject
          const calls = new Map<string, (Call & { waiting: boolean })[]>()
          for (const step of steps) {
            clock.advance(step.delay)
            const ofKey = calls.get(step.key) ?? []
            calls.set(step.key, ofKey)
            if (step.kind === 'leave') {
              // A waiter whose slot is still ahead leaves: its slot is given back.
              const waiting = ofKey.filter((call) => call.waiting && call.time > clock.now)
              const leaving = waiting[step.pick % Math.max(1, waiting.length)]
              if (leaving === undefined) continue
              ofKey.splice(ofKey.indexOf(leaving), 1)
              await refund(step.key, leaving.cost, leaving.time)
              continue
            }
            // The limiter refuses a cost above a rule's limit before asking the store.
            if (rules.some((rule) => step.cost > rule.maxCost)) continue
            const decision = await consume(step.key, step.cost, step.reserve)
            if (!decision.allowed) continue
            const wait = decision.wait ?? 0
            ofKey.push({ time: decision.now + wait, cost: step.cost, waiting: wait > 0 })
          }
          for (const [key, ofKey] of calls) {
            expect({ key, overLimit: overLimit(rules, ofKey) }).toEqual({ key, overLimit: undefined })
          }
        }),
        { numRuns },
      )
    })

    it('every decision after slots given back, in any order, equals the reference model', async () => {
      await fc.assert(
        fc.asyncProperty(giveBackArbitrary(), async ({ rules: specs, steps }) => {
          const rules = specs.map(buildRule)
          const subject = await reserving(rules)
          if (subject === undefined) return
          const { clock, consume, refund } = subject
          const histories = new Map<string, Admission[][]>()
          const waiting = new Map<string, Call[]>()
          for (const step of steps) {
            clock.advance(step.delay)
            const history = histories.get(step.key) ?? rules.map(() => [])
            histories.set(step.key, history)
            const ofKey = (waiting.get(step.key) ?? []).filter((call) => call.time > clock.now)
            waiting.set(step.key, ofKey)
            if (step.kind === 'leave') {
              const leaving = ofKey[step.pick % Math.max(1, ofKey.length)]
              if (leaving === undefined) continue
              ofKey.splice(ofKey.indexOf(leaving), 1)
              giveBack(rules, history, clock.now, leaving.cost, leaving.time)
              await refund(step.key, leaving.cost, leaving.time)
              continue
            }
            if (rules.some((rule) => step.cost > rule.maxCost)) continue
            const expected = reserve(rules, history, clock.now, step.cost, step.reserve)
            const decision = await consume(step.key, step.cost, step.reserve)
            expect({ allowed: decision.allowed, wait: decision.wait ?? 0 }).toEqual({
              allowed: expected.allowed,
              wait: expected.wait,
            })
            expect(decision.outcomes.map((outcome) => outcome.remaining)).toEqual(expected.remaining)
            expect(decision.outcomes.map((outcome) => outcome.reset)).toEqual(expected.reset)
            if (expected.wait > 0) ofKey.push({ time: decision.now + expected.wait, cost: step.cost })
          }
        }),
        { numRuns },
      )
    })

    each([
      ['GCRA', () => gcra({ limit: 10, window: '1s', burst: 1 })],
      ['token bucket', () => tokenBucket({ capacity: 1, refillRate: 10, interval: '1s' })],
      ['sliding window log', () => slidingWindowLog({ limit: 1, window: '100ms' })],
    ])(
      '%s, 10 a second: waiters leaving in the middle of the queue never free a slot a later waiter holds',
      async (_, make) => {
        const subject = await reserving([make()])
        if (subject === undefined) return
        const { consume, refund } = subject
        const slots: number[] = []
        for (let i = 0; i < 10; i++) {
          const decision = await consume('k', 1, 60_000)
          slots.push(decision.now + (decision.wait ?? 0))
        }
        const start = slots[0]!
        expect(slots.map((at) => at - start)).toEqual([0, 100, 200, 300, 400, 500, 600, 700, 800, 900])
        // Waiters 3 and 5 leave; 8 and 9 still wait.
        await refund('k', 1, slots[3]!)
        await refund('k', 1, slots[5]!)
        const next = [await consume('k', 1, 60_000), await consume('k', 1, 60_000)]
        const nextSlots = next.map((decision) => decision.now + (decision.wait ?? 0) - start)
        // After the last waiter, not on its slot (GCRA and the token bucket leave the two slots empty; the log
        // frees their entries, but reserves first come, first served, after its newest entry).
        expect(nextSlots).toEqual([1_000, 1_100])
      },
    )

    each([
      ['GCRA', () => gcra({ limit: 10, window: '1s', burst: 1 })],
      ['GCRA with bursts of 3', () => gcra({ limit: 10, window: '1s', burst: 3 })],
      ['token bucket', () => tokenBucket({ capacity: 1, refillRate: 10, interval: '1s' })],
      ['token bucket of 3', () => tokenBucket({ capacity: 3, refillRate: 10, interval: '1s' })],
    ])(
      '%s: slots given back latest first all come back, and the next caller takes the first',
      async (_, make) => {
        const subject = await reserving([make()])
        if (subject === undefined) return
        const { consume, refund } = subject
        const decisions = []
        for (let i = 0; i < 8; i++) decisions.push(await consume('k', 1, 60_000))
        const reserved = decisions.filter((decision) => (decision.wait ?? 0) > 0)
        expect(reserved.length).toBeLessThanOrEqual(7)
        for (const decision of [...reserved].reverse()) await refund('k', 1, decision.now + decision.wait!)
        const first = reserved[0]!
        const again = await consume('k', 1, 60_000)
        expect(again.now + (again.wait ?? 0)).toBe(first.now + first.wait!)
      },
    )
  })
}
