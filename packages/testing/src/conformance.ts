/**
 * The store conformance suite, one section per module under `conformance/`; this file composes them in the order
 * their tests run and are named.
 */
import { describeBoundaries } from './conformance/boundaries.js'
import { suiteContext } from './conformance/context.js'
import { describeDebt } from './conformance/debt.js'
import { describeGcra } from './conformance/gcra.js'
import { describeGivenBackSlots } from './conformance/given-back-slots.js'
import { describeOverrides } from './conformance/overrides.js'
import { describePenalties } from './conformance/penalties.js'
import { describePlans } from './conformance/plans.js'
import { describeProperties } from './conformance/properties.js'
import { describeQuotas } from './conformance/quotas.js'
import { describeRefundTiming } from './conformance/refund-timing.js'
import { describeReservations } from './conformance/reservations.js'
import { describeReserveThenSettle } from './conformance/reserve-then-settle.js'
import { describeSeveralRules } from './conformance/several-rules.js'
import { describeTimeThatStepsBack } from './conformance/time-steps-back.js'
import type { StoreUnderTest, TestFunctions } from './conformance/types.js'
import { describeWorkedExamples } from './conformance/worked-examples.js'

export type { Expect, StoreUnderTest, TestFunctions } from './conformance/types.js'

/**
 * Registers the store conformance suite (the one MemoryStore and RedisStore pass) with the caller's test runner:
 * worked examples of every algorithm, penalties, reserve-then-settle, debt (a settle above the estimate charged in
 * full and owed), boundaries, a clock that steps back,
 * refunds, reserved slots given back (never two calls on one slot), overrides and manual blocks (for a store with
 * `overrides: true`), quotas on the calendar (for a store with `quotas: true`), plans (for a store with `plans: true`), and properties over random traces checked against a naive reference model. A store that passes it
 * decides exactly as ratewindow's own stores do.
 * @example
 * import { describe, expect, it } from 'vitest'
 * describeStoreConformance({ describe, it, expect }, { name: 'MyStore', createStore: (clock) => new MyStore({ clock: clock.read }) })
 */
export function describeStoreConformance(test: TestFunctions, subject: StoreUnderTest): void {
  const suite = suiteContext(test, subject)
  describeWorkedExamples(suite)
  describeGcra(suite)
  describePenalties(suite)
  describeReserveThenSettle(suite)
  describeDebt(suite, false)
  describeBoundaries(suite)
  describeTimeThatStepsBack(suite)
  describeRefundTiming(suite)
  describeSeveralRules(suite)
  describeReservations(suite)
  describeGivenBackSlots(suite)
  describeOverrides(suite)
  describeQuotas(suite)
  describePlans(suite)
  describeProperties(suite)
}

/**
 * Registers the quotas section alone (quota rules on the calendar: a billing anchor across month lengths and a
 * daylight-saving change, quota and rate rules in one decision, debt, overrides, random traces against the reference
 * model) for a store that is not meant to pass the rest, such as SyncedStore (which decides quotas through its exact
 * RedisStore). `quotas: true` is implied.
 * @example
 * describeQuotaConformance({ describe, it, expect }, { name: 'MyStore', createStore: (clock) => new MyStore({ clock: clock.read }) })
 */
export function describeQuotaConformance(test: TestFunctions, subject: StoreUnderTest): void {
  describeQuotas(suiteContext(test, { ...subject, quotas: true }))
}

/**
 * Registers the plans section alone (a plan change keeping the period's usage, the plan recorded with the key's
 * state and read by peeks, `inspect`, `usage` and `top`, overrides over a plan's limits, settles, unknown plans) for a
 * store that is not meant to pass the rest, such as SyncedStore (which decides planned keys through its exact
 * RedisStore). `plans: true` is implied.
 * @example
 * describePlanConformance({ describe, it, expect }, { name: 'MyStore', createStore: (clock) => new MyStore({ clock: clock.read }) })
 */
export function describePlanConformance(test: TestFunctions, subject: StoreUnderTest): void {
  describePlans(suiteContext(test, { ...subject, plans: true }))
}

/**
 * Registers the overrides section of the suite alone (overrides, manual blocks, give/take, inspect, and processes
 * sharing the store): for a store that keeps overrides but is not meant to pass the rest, such as SyncedStore (no
 * penalties; its counts are synchronised, not exact), or to run the section apart. `overrides: true` is implied.
 * @example
 * describeOverridesConformance({ describe, it, expect }, { name: 'MyStore', createStore: (clock) => new MyStore({ clock: clock.read }) })
 */
export function describeOverridesConformance(test: TestFunctions, subject: StoreUnderTest): void {
  describeOverrides(suiteContext(test, { ...subject, overrides: true }))
}

/**
 * Registers the debt section alone (a settle above the estimate charged in full, owed until it has passed at each
 * rule's rate, bounded by `maxDebt` and what each rule carries, the rest reported uncharged; the operator's `take`
 * charging only what the rules admit) for a store that is not meant to pass the rest and whose fixed window carries
 * a debt one window, such as SyncedStore (its shared counters keep two windows; docs/policies.md): one limit at
 * most, and none while a window carries a debt from the one before.
 * @example
 * describeDebtConformance({ describe, it, expect }, { name: 'MyStore', createStore: (clock) => new MyStore({ clock: clock.read }) })
 */
export function describeDebtConformance(test: TestFunctions, subject: StoreUnderTest): void {
  describeDebt(suiteContext(test, subject), true)
}
