/** The random inputs of the properties: rule sets as plain specs, times, and traces of requests. */
import {
  fixedWindow,
  gcra,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import fc from 'fast-check'

type RuleSpec =
  | { kind: 'fixed' | 'log' | 'counter'; limit: number; window: number }
  | { kind: 'bucket'; capacity: number; refillRate: number; interval: number }
  | { kind: 'gcra'; limit: number; window: number; burst: number }

/** Rules are generated as plain specs, so that fast-check prints a failing trace readably. */
export function buildRule(spec: RuleSpec): Rule {
  // The factories refuse unknown option names, so `kind` stays out of what they receive.
  switch (spec.kind) {
    case 'bucket': {
      const { kind: _, ...options } = spec
      return tokenBucket(options)
    }
    case 'gcra': {
      const { kind: _, ...options } = spec
      return gcra(options)
    }
    default: {
      const { kind, ...options } = spec
      if (kind === 'fixed') return fixedWindow(options)
      return kind === 'log' ? slidingWindowLog(options) : slidingWindowCounter(options)
    }
  }
}

/**
 * Times are in whole seconds plus a few ms: Redis expires keys by its own wall clock while the traces run on a
 * simulated one, so a state that matters for only a few simulated ms could vanish between two steps of a slow
 * run. Seconds keep every TTL far above a run's real duration except in the last ms before an expiry.
 */
export const time = (minSeconds: number, maxSeconds: number) =>
  fc
    .tuple(fc.integer({ min: minSeconds, max: maxSeconds }), fc.integer({ min: 0, max: 3 }))
    .map(([seconds, ms]) => seconds * 1_000 + ms)
const windowSpec = { limit: fc.integer({ min: 2, max: 6 }), window: time(10, 3_000) }
/** Rule specs; `least` is the smallest bucket capacity and GCRA burst. */
const ruleSpecs = (least = 2): fc.Arbitrary<RuleSpec> =>
  fc.oneof(
    fc.record({ kind: fc.constantFrom('fixed' as const, 'log' as const, 'counter' as const), ...windowSpec }),
    fc.record({
      kind: fc.constant('bucket' as const),
      capacity: fc.integer({ min: least, max: 6 }),
      refillRate: fc.integer({ min: 1, max: 5 }),
      interval: time(10, 1_000),
    }),
    fc.record({
      kind: fc.constant('gcra' as const),
      limit: fc.integer({ min: 1, max: 6 }),
      window: time(10, 3_000),
      burst: fc.integer({ min: least, max: 6 }),
    }),
  )
const ruleSpecArbitrary = ruleSpecs()

/** Rule sets of algorithms that reserve: 1-2 rules with distinct ids and names. */
const reservingRules = (least = 2) =>
  fc.uniqueArray(
    ruleSpecs(least).filter((spec) => spec.kind === 'log' || spec.kind === 'bucket' || spec.kind === 'gcra'),
    {
      minLength: 1,
      maxLength: 2,
      selector: buildRule,
      comparator: (a, b) => a.id === b.id || a.name === b.name,
    },
  )

/** Rule sets of algorithms that reserve (1-2 rules) and traces of (delay, key, cost, longest wait). */
export function reservationArbitrary() {
  return fc.record({
    rules: reservingRules(),
    steps: fc.array(
      fc.record({
        delay: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3 }), time(0, 50), time(0, 2_000)),
        key: fc.constantFrom('a', 'b'),
        cost: fc.integer({ min: 1, max: 2 }),
        reserve: fc.oneof(fc.constant(0), time(0, 100), time(0, 3_000)),
      }),
      { minLength: 1, maxLength: 40 },
    ),
  })
}

/**
 * Rule sets that reserve and traces of reservations and of waiters leaving: `leave` gives back the slot of the
 * `pick`-th (modulo) reservation of its key still ahead, if any. Short delays, so that many slots are still ahead.
 */
export function giveBackArbitrary() {
  const delay = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3 }), time(0, 50))
  const key = fc.constantFrom('a', 'b')
  return fc.record({
    // A burst of 1 too: there, two calls on one slot exceed the rule (a larger burst has room for them).
    rules: reservingRules(1),
    steps: fc.array(
      fc.oneof(
        fc.record({
          kind: fc.constant('reserve' as const),
          delay,
          key,
          cost: fc.integer({ min: 1, max: 2 }),
          reserve: fc.oneof(time(0, 100), time(0, 3_000)),
        }),
        fc.record({ kind: fc.constant('leave' as const), delay, key, pick: fc.nat({ max: 40 }) }),
      ),
      { minLength: 1, maxLength: 50 },
    ),
  })
}

/** Random rule sets (1-3 rules with distinct ids and names) and traces of (delay, key, cost, limit | peek). */
export function traceArbitrary() {
  return fc.record({
    rules: fc.uniqueArray(ruleSpecArbitrary, {
      minLength: 1,
      maxLength: 3,
      // Rules in one limiter need distinct storage ids and distinct policy names.
      selector: buildRule,
      comparator: (a, b) => a.id === b.id || a.name === b.name,
    }),
    steps: fc.array(
      fc.record({
        delay: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3 }), time(0, 50), time(0, 4_000)),
        key: fc.constantFrom('a', 'b'),
        cost: fc.integer({ min: 0, max: 2 }),
        action: fc.constantFrom('limit', 'limit', 'limit', 'peek'),
      }),
      { minLength: 1, maxLength: 40 },
    ),
  })
}
