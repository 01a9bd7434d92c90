import { blockedFor, type Penalty, type PenaltyState, recordDenial } from '../../algorithms/penalty.js'
import type { OutcomeRecord, Rule, RuleOutcome } from '../../algorithms/types.js'
import type { Decision, DecisionRecord, Store } from '../types.js'

/** Marks a `consume` whose decision its store's `decideInto` writes (see `decidesInto`). */
const MIRRORED = Symbol('consume mirrored by decideInto')

/** @internal Says that `decideInto` decides as `consume` does, for the store class whose `consume` this is. */
export function mirroredByDecideInto(consume: object): void {
  Object.defineProperty(consume, MIRRORED, { value: true })
}

/**
 * @internal Whether `store.decideInto` may stand for `store.consume`: only while `consume` is the one it mirrors.
 * A `consume` of a subclass, one replaced on the store (a test's spy), or one seen through a Proxy that watches the
 * store's calls is the store's decision, and `decideInto` is then not called.
 */
export function decidesInto(store: Store): boolean {
  const consume = store.consume as ((...args: never[]) => unknown) & { [MIRRORED]?: true }
  return consume[MIRRORED] === true && typeof store.decideInto === 'function'
}

/** @internal An empty `DecisionRecord`. */
export function decisionRecord(): DecisionRecord {
  return { allowed: false, now: 0, blocked: 0, wait: 0, remaining: [], reset: [], retryAfter: [] }
}

/**
 * The all-or-nothing decision over in-process states, shared by in-process stores, written into `into`. The Redis
 * script runs the same steps in Lua: advance every rule, check that every rule fits, then consume from all or none.
 * @internal
 */
export function decideInto(
  into: DecisionRecord,
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
): void {
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
  for (let i = 0; i < rules.length; i++) {
    const logic = rules[i]!.logic
    if (wait > 0) logic.reserve!(states[i], now, now + wait, cost)
    else if (allowed && write) logic.consume(states[i], now, cost)
    // Admitted: `retryAfter` tells when a cost-1 request passes next (the reset headers' value at remaining 0).
    logic.report(states[i], now, allowed && pending ? cost : 0, allowed ? 1 : cost, into, i)
  }
  if (!allowed && blocked === 0 && write && penalty !== undefined && penaltyState !== undefined) {
    blocked = recordDenial(penalty, penaltyState, now)
  }
  into.allowed = allowed
  into.now = now
  into.blocked = blocked
  into.wait = wait
}

/** The record of the general path, read into a `Decision` at once (a synchronous step: one is enough). */
const scratch = decisionRecord()

/** Rule `i`'s outcome in `record`, as an object. */
function outcomeAt(record: OutcomeRecord, i: number): RuleOutcome {
  return { remaining: record.remaining[i]!, reset: record.reset[i]!, retryAfter: record.retryAfter[i]! }
}

/**
 * `decideInto`, answered as a `Decision` (the `Store` contract's answer): the decision of the stores' general path.
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
  pending = false,
  reserve?: number,
): Decision {
  decideInto(scratch, rules, states, now, cost, write, penalty, penaltyState, pending, reserve)
  const { allowed, blocked, wait } = scratch
  const outcomes: RuleOutcome[] = new Array(rules.length)
  for (let i = 0; i < rules.length; i++) {
    outcomes[i] = outcomeAt(scratch, i)
    // A peek reports the units free now, not what would be left after it (nothing is pending), and those used.
    if (!write && !pending) outcomes[i]!.used = rules[i]!.logic.used(states[i], now)
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
    logic.report(states[i], now, 0, 1, scratch, i)
    outcomes[i] = outcomeAt(scratch, i)
  }
  return { charged: k, decision: { allowed: true, now, outcomes } }
}
