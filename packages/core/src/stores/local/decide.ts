import { blockedFor, type Penalty, type PenaltyState, recordDenial } from '../../algorithms/penalty.js'
import type { Rule, RuleOutcome } from '../../algorithms/types.js'
import type { Decision } from '../types.js'

/**
 * The all-or-nothing decision over in-process states, shared by in-process stores. The Redis script runs
 * the same steps in Lua: advance every rule, check that every rule fits, then consume from all or none.
 * @internal
 */
export function decideLocally(
  rules: readonly Rule[],
  states: unknown[],
  now: number,
  cost: number,
  write: boolean,
  penalty?: Penalty,
  penaltyState?: PenaltyState,
  /** Admitted but written elsewhere (SyncedStore's consume): reported as after the request. */
  pending = false,
  /** Reservation (`StoreRequest.reserve`): the longest wait a request over the limit may be given, ms. */
  reserve?: number,
): Decision {
  // A blocked key is denied whatever its rules say, and its denials are not counted again.
  let blocked = penaltyState === undefined ? 0 : blockedFor(penaltyState, now)
  let allowed = blocked === 0
  for (let i = 0; i < rules.length; i++) {
    const logic = rules[i]!.logic
    logic.advance(states[i], now)
    if (!logic.fits(states[i], now, cost)) allowed = false
  }
  const wait =
    reserve !== undefined && write && blocked === 0 ? reservedWait(rules, states, now, cost, reserve) : 0
  if (wait > 0) allowed = true
  const outcomes: RuleOutcome[] = new Array(rules.length)
  for (let i = 0; i < rules.length; i++) {
    const logic = rules[i]!.logic
    if (wait > 0) logic.reserve!(states[i], now, now + wait, cost)
    else if (allowed && write) logic.consume(states[i], now, cost)
    // Admitted: `retryAfter` tells when a cost-1 request passes next (the reset headers' value at remaining 0).
    // A peek reports the units free now, not what would be left after it (nothing is pending), and those used.
    outcomes[i] = logic.report(states[i], now, allowed && pending ? cost : 0, allowed ? 1 : cost)
    if (!write && !pending) outcomes[i]!.used = logic.used(states[i], now)
  }
  if (!allowed && blocked === 0 && write && penalty !== undefined && penaltyState !== undefined) {
    blocked = recordDenial(penalty, penaltyState, now)
  }
  if (wait > 0) return { allowed, now, outcomes, wait }
  return blocked > 0 ? { allowed, now, outcomes, blocked } : { allowed, now, outcomes }
}

/**
 * The wait of a reservation: the earliest time every rule admits the request (the largest of the rules' waits),
 * when it is within `reserve` ms; 0 to decide as without one (admitted now, or denied). A rule set with an
 * algorithm that cannot reserve never reserves.
 * @internal
 */
export function reservedWait(
  rules: readonly Rule[],
  states: unknown[],
  now: number,
  cost: number,
  reserve: number,
): number {
  let wait = 0
  for (let i = 0; i < rules.length; i++) {
    const logic = rules[i]!.logic
    if (logic.wait === undefined || logic.reserve === undefined) return 0
    wait = Math.max(wait, logic.wait(states[i], now, cost))
  }
  return wait <= reserve ? wait : 0
}

/**
 * Charges `cost` (`Store.charge`, for `RateLimiter.settle` and the operator's `take`): the largest k <= cost that
 * leaves no rule more than its debt past its limit ("fits" only gets harder as k grows, and is linear in the
 * cost, so that k fits with a debt of D where k − D fits). A rule's debt is `maxDebt` (units per rule; undefined,
 * each rule's `limit`, one window; 0, what every rule still admits and never more), at most what its state
 * carries (`AlgorithmLogic.carriedDebt`) and what the store carries (`carried`, per rule: SyncedStore's). The
 * Redis script's charge mode runs the same steps. The decision's outcomes are those after the charge.
 * @internal
 */
export function chargeLocally(
  rules: readonly Rule[],
  states: unknown[],
  now: number,
  cost: number,
  maxDebt?: number,
  carried?: readonly number[],
): { charged: number; decision: Decision } {
  let k = cost
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!
    const logic = rule.logic
    const debt = Math.min(
      maxDebt ?? rule.limit,
      logic.carriedDebt ?? Number.POSITIVE_INFINITY,
      carried?.[i] ?? Number.POSITIVE_INFINITY,
    )
    logic.advance(states[i], now)
    if (logic.fits(states[i], now, k - debt)) continue
    let lo = 0
    let hi = k - 1
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2)
      if (logic.fits(states[i], now, mid - debt)) lo = mid
      else hi = mid - 1
    }
    k = lo
  }
  const outcomes: RuleOutcome[] = new Array(rules.length)
  for (let i = 0; i < rules.length; i++) {
    const logic = rules[i]!.logic
    logic.consume(states[i], now, k)
    outcomes[i] = logic.report(states[i], now, 0, 1)
  }
  return { charged: k, decision: { allowed: true, now, outcomes } }
}
