/**
 * The per-key steps of a store that decides in JavaScript beside the state, written once: `consume`,
 * `peek`, `refund` and `charge` on one client's state, how long that state must be kept, and `acquire` on its
 * leases. `MemoryStore` runs them on its entries, the remote-store kit (remote.ts) on state read from another
 * process's storage: both decide with the same code.
 *
 * Every step works on a live state (`liveAt`): the caller replaces an expired one by a fresh one first.
 */
import { freshPenalty, type Penalty, type PenaltyState, penaltyTtl } from '../../algorithms/penalty.js'
import type { Rule } from '../../algorithms/types.js'
import type { Decision, LeaseDecision, LeaseRequest } from '../types.js'
import { chargeLocally, decideLocally } from './decide.js'

/**
 * @internal One client's state under one limiter: one algorithm state per rule (in rule order), the penalty's
 * state when the limiter has a penalty, and when all of it equals a fresh state again (ms, the deciding clock).
 */
export interface KeyStateData {
  states: unknown[]
  penalty?: PenaltyState | undefined
  expiresAt: number
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
): Decision {
  if (penalty !== undefined) state.penalty ??= freshPenalty()
  return decideLocally(rules, state.states, now, cost, true, penalty, state.penalty, false, reserve)
}

/** @internal The decision `consumeKey` would give now, on a copy: `live` (undefined: a fresh state) is left as it was. */
export function peekKey(
  rules: readonly Rule[],
  live: KeyStateData | undefined,
  now: number,
  cost: number,
  penalty: Penalty | undefined,
): Decision {
  // A copy: advancing the real state to a peeked time would corrupt it if the clock later reads earlier.
  const states = live === undefined ? freshStates(rules) : structuredClone(live.states)
  const penaltyState = live?.penalty === undefined ? undefined : { ...live.penalty }
  return decideLocally(rules, states, now, cost, false, penalty, penaltyState)
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

/** @internal Charges as much of `cost` as every rule of `state` still admits; returns the units charged. */
export function chargeKey(rules: readonly Rule[], state: KeyStateData, now: number, cost: number): number {
  return chargeLocally(rules, state.states, now, cost).charged
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
 * leases are dropped, and the new one is added when fewer than `limit` are held.
 */
export function acquireLeaseIn(
  leases: Map<string, number>,
  request: Pick<LeaseRequest, 'id' | 'limit' | 'leaseMs'>,
  now: number,
): LeaseDecision {
  let nextExpiry = Number.POSITIVE_INFINITY
  for (const [lease, expiresAt] of leases) {
    if (expiresAt <= now) leases.delete(lease)
    else nextExpiry = Math.min(nextExpiry, expiresAt)
  }
  const allowed = leases.size < request.limit
  if (allowed) {
    leases.set(request.id, now + request.leaseMs)
    nextExpiry = Math.min(nextExpiry, now + request.leaseMs)
  }
  return { allowed, inFlight: leases.size, nextExpiry: leases.size === 0 ? 0 : nextExpiry - now }
}

/** @internal Drops the expired leases of one client, in place. */
export function dropExpiredLeases(leases: Map<string, number>, now: number): void {
  for (const [lease, expiresAt] of leases) if (expiresAt <= now) leases.delete(lease)
}
