/**
 * The per-key steps of a store that decides in JavaScript beside the state, written once: `consume`,
 * `peek`, `refund` and `charge` on one client's state, how long that state must be kept, and `acquire` on its
 * leases. `MemoryStore` runs them on its entries, the remote-store kit (remote.ts) on state read from another
 * process's storage: both decide with the same code.
 *
 * Every step works on a live state (`liveAt`): the caller replaces an expired one by a fresh one first.
 */
import { type ManualBlock, type OverrideRecord, rulesWith } from '../../algorithms/override.js'
import { freshPenalty, type Penalty, type PenaltyState, penaltyTtl } from '../../algorithms/penalty.js'
import { limitsInForce, type PlanInForce, RecordedPlans } from '../../algorithms/plans.js'
import type { Rule } from '../../algorithms/types.js'
import type { Decision, DecisionRecord, LeaseDecision, LeaseRequest } from '../types.js'
import { chargeLocally, decideInto, decideLocally } from './decide.js'

/**
 * @internal One client's state under one limiter: one algorithm state per rule (in rule order), the penalty's
 * state when the limiter has a penalty, and when all of it equals a fresh state again (ms, the deciding clock).
 */
export interface KeyStateData {
  states: unknown[]
  penalty?: PenaltyState | undefined
  expiresAt: number
  /**
   * Under an override: the parameters (`Rule.script.params`) of the rules the states were last written with,
   * where they differ from the coded rules' (`tuneKey` converts the states when they change).
   */
  tuned?: (readonly number[])[] | undefined
  /** The key's plan, recorded by the last step that wrote with one (`StoreTarget.plan`). */
  plan?: PlanInForce | undefined
}

/**
 * @internal The plan a step decides with: the request's (recorded on `state` by a step that writes), or for a read of
 * the recorded plan the one `state` holds, with its limits as the limiter's plans give them (a name not among them:
 * none); undefined without plans.
 */
export function planOf(
  requested: PlanInForce | RecordedPlans | undefined,
  state: KeyStateData | undefined,
  writes: boolean,
): PlanInForce | undefined {
  if (requested === undefined) return undefined
  if (requested instanceof RecordedPlans) {
    const recorded = state?.plan
    return recorded === undefined ? undefined : requested.byName.get(recorded.name)
  }
  if (writes && state !== undefined) state.plan = requested
  return requested
}

/** @internal `state` while it still holds anything at `now`; undefined once expired (it decides as a fresh one). */
export function liveAt<T extends KeyStateData>(state: T | undefined, now: number): T | undefined {
  return state !== undefined && state.expiresAt > now ? state : undefined
}

/** @internal Fresh algorithm states for `rules`, in rule order. */
export function freshStates(rules: readonly Rule[]): unknown[] {
  return rules.map((rule) => rule.logic.create())
}

/**
 * @internal The rules in force for `state` under the override `record` and the `plan` (undefined: none, the coded
 * `rules`), its states converted to them when they were last written under other limits (`AlgorithmLogic.adopt`).
 */
export function tuneKey(
  rules: readonly Rule[],
  state: KeyStateData,
  record: OverrideRecord | undefined,
  now: number,
  plan?: PlanInForce,
): readonly Rule[] {
  const inForce = rulesWith(rules, limitsInForce(record?.limits, plan?.limits))
  const { tuned } = state
  if (tuned === undefined && inForce === rules) return rules
  for (let i = 0; i < inForce.length; i++) {
    const from = tuned?.[i] ?? rules[i]!.script.params
    const to = inForce[i]!.script.params
    if (from[0] !== to[0] || from[1] !== to[1] || from[2] !== to[2])
      inForce[i]!.logic.adopt?.(state.states[i], from, now)
  }
  state.tuned = inForce === rules ? undefined : inForce.map((rule) => rule.script.params)
  return inForce
}

/**
 * @internal A decision made under an override record: the rules in force beside it when they are not the coded
 * ones, and the manual block that refused it.
 */
export function underOverride(
  decision: Decision,
  rules: readonly Rule[],
  inForce: readonly Rule[],
  record: OverrideRecord | undefined,
  plan?: PlanInForce,
): Decision {
  if (inForce !== rules) decision.rules = inForce
  if (plan !== undefined) decision.plan = plan.name
  if (record?.limits !== undefined) decision.override = record.limits
  if (record?.block !== undefined) decision.manualBlock = record.block
  return decision
}

/**
 * @internal Decides a request on `state` and records it when every rule admits it (all or nothing, the penalty
 * in the same step; a reservation when `reserve` is given).
 */
export function consumeKey(
  rules: readonly Rule[],
  state: KeyStateData,
  now: number,
  cost: number,
  penalty: Penalty | undefined,
  reserve?: number,
  block?: ManualBlock,
): Decision {
  if (block !== undefined) return blockedDecision(rules, state.states, now, cost, block)
  if (penalty !== undefined) state.penalty ??= freshPenalty()
  return decideLocally(rules, state.states, now, cost, true, penalty, state.penalty, false, reserve)
}

/**
 * @internal `consumeKey` under the coded rules, without a reservation or a manual block, written into the caller's
 * record (`Store.decideInto`).
 */
export function consumeKeyInto(
  into: DecisionRecord,
  rules: readonly Rule[],
  state: KeyStateData,
  now: number,
  cost: number,
  penalty: Penalty | undefined,
): void {
  if (penalty !== undefined) state.penalty ??= freshPenalty()
  decideInto(into, rules, state.states, now, cost, true, penalty, state.penalty)
}

/**
 * @internal A manually blocked key: refused whatever its counters say, nothing counted; the rules report as a peek.
 */
export function blockedDecision(
  rules: readonly Rule[],
  states: unknown[],
  now: number,
  cost: number,
  block: ManualBlock,
): Decision {
  const decision = decideLocally(rules, states, now, cost, false)
  return { ...decision, allowed: false, blocked: block.until - now }
}

/** @internal The decision `consumeKey` would give now, on a copy: `live` (undefined: a fresh state) is left as it was. */
export function peekKey(
  rules: readonly Rule[],
  live: KeyStateData | undefined,
  now: number,
  cost: number,
  penalty: Penalty | undefined,
  record?: OverrideRecord,
  plan?: PlanInForce,
): Decision {
  // A copy: advancing the real state to a peeked time would corrupt it if the clock later reads earlier.
  const copy: KeyStateData = {
    states: live === undefined ? freshStates(rules) : structuredClone(live.states),
    expiresAt: 0,
    tuned: live?.tuned,
  }
  const inForce = tuneKey(rules, copy, record, now, plan)
  const block = record?.block
  const penaltyState = live?.penalty === undefined ? undefined : { ...live.penalty }
  const decision =
    block !== undefined
      ? blockedDecision(inForce, copy.states, now, cost, block)
      : decideLocally(inForce, copy.states, now, cost, false, penalty, penaltyState)
  return underOverride(decision, rules, inForce, record, plan)
}

/** @internal Gives back `cost` units admitted at `at` (ms) to every rule of `state`. */
export function refundKey(
  rules: readonly Rule[],
  state: KeyStateData,
  now: number,
  cost: number,
  at: number,
): void {
  rules.forEach((rule, i) => {
    rule.logic.advance(state.states[i], now)
    rule.logic.refund(state.states[i], now, cost, at)
  })
}

/**
 * @internal Gives up to `cost` units back to every rule of `state` now (`RateLimiter.give`): the newest units a
 * rule holds, as far as it holds them.
 */
export function giveKey(rules: readonly Rule[], state: KeyStateData, now: number, cost: number): void {
  rules.forEach((rule, i) => {
    const logic = rule.logic
    logic.advance(state.states[i], now)
    if (logic.give !== undefined) logic.give(state.states[i], now, cost)
    else logic.refund(state.states[i], now, cost, now)
  })
}

/**
 * @internal Charges `cost` to every rule of `state`, as far as it leaves none more than its debt past its limit
 * (`chargeLocally`); returns the units charged and the decision after the charge.
 */
export function chargeKey(
  rules: readonly Rule[],
  state: KeyStateData,
  now: number,
  cost: number,
  maxDebt: number | undefined,
): { charged: number; decision: Decision } {
  return chargeLocally(rules, state.states, now, cost, maxDebt)
}

/**
 * @internal After a step that changed `state`: sets its expiry, when every rule (and the penalty) is fresh again.
 * Returns false when that is now, i.e. nothing is left to keep: the caller drops the key.
 */
export function keepKey(
  rules: readonly Rule[],
  penalty: Penalty | undefined,
  state: KeyStateData,
  now: number,
): boolean {
  let ttl = 0
  for (let i = 0; i < rules.length; i++) ttl = Math.max(ttl, rules[i]!.logic.ttl(state.states[i], now))
  if (penalty !== undefined && state.penalty !== undefined)
    ttl = Math.max(ttl, penaltyTtl(penalty, state.penalty, now))
  if (ttl <= 0) return false
  state.expiresAt = now + ttl
  return true
}

/**
 * @internal An `acquire` on one client's in-flight leases (lease id → expiry, ms), changed in place: expired
 * leases are dropped, and the new one is added when fewer than `limit` others are held. An id held already is
 * renewed (its lease runs `leaseMs` from now) as long as no more than `limit` are held with it: a holder renews its
 * slot by acquiring it again.
 */
export function acquireLeaseIn(
  leases: Map<string, number>,
  request: Pick<LeaseRequest, 'id' | 'limit' | 'leaseMs'>,
  now: number,
): LeaseDecision {
  dropExpiredLeases(leases, now)
  const others = leases.has(request.id) ? leases.size - 1 : leases.size
  const allowed = others < request.limit
  if (allowed) leases.set(request.id, now + request.leaseMs)
  let nextExpiry = Number.POSITIVE_INFINITY
  for (const expiresAt of leases.values()) nextExpiry = Math.min(nextExpiry, expiresAt)
  return { allowed, inFlight: leases.size, nextExpiry: leases.size === 0 ? 0 : nextExpiry - now }
}

/** @internal Drops the expired leases of one client, in place. */
export function dropExpiredLeases(leases: Map<string, number>, now: number): void {
  for (const [lease, expiresAt] of leases) if (expiresAt <= now) leases.delete(lease)
}
