import {
  fixedWindow,
  gcra,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '../../algorithms/index.js'
import { type LimitOverride, type OverrideRecord, rulesWith } from '../../algorithms/override.js'
import type { Penalty } from '../../algorithms/penalty.js'
import { limitsInForce, type PlanInForce, RecordedPlans, readRecordedPlan } from '../../algorithms/plans.js'
import { type QuotaCalendar, quotaCalendar, quotaRule } from '../../algorithms/quota.js'
import { rateWindowOf } from '../../algorithms/rule.js'
import type { AlgorithmName, Rule } from '../../algorithms/types.js'
import { RateLimitError } from '../../support/errors.js'
import type {
  Decision,
  LeaseDecision,
  LeaseRequest,
  RefundRequest,
  StoreRequest,
  StoreTarget,
} from '../types.js'
import { storedClientId } from './client-id.js'
import {
  acquireLeaseIn,
  chargeKey,
  consumeKey,
  freshStates,
  giveKey,
  type KeyStateData,
  keepKey,
  liveAt,
  peekKey,
  planOf,
  refundKey,
  tuneKey,
  underOverride,
} from './key-state.js'

/**
 * A rule as parameters, to cross a process boundary: `[algorithm, id, p0, p1, p2]` (the numbers the Redis script
 * receives too). Rebuilt on the other side with the same factories, so both sides decide with one code. A request
 * that reads overrides adds what an override needs to make the rule again: its policy name and, for GCRA, its
 * window (the Redis script receives both too).
 */
export type EncodedRule = readonly [
  algorithm: AlgorithmName,
  id: string,
  p0: number,
  p1: number,
  p2: number,
  /** With `overrides`: the rule's policy name, by which an override names it. */
  name?: string,
  /** With `overrides`: GCRA's window in ms, which `p0 / p1` (its rate, reduced) loses; 0 for the others. */
  window?: number,
  /** A quota's calendar (its period, zone and anchor), which its parameters do not hold; the others have none. */
  calendar?: QuotaCalendar,
]

/**
 * A store call in plain data (JSON and structured clone carry it): for stores that decide in another process,
 * such as the Durable Object store of `@ratewindow/cloudflare`. Make it with `encodeStoreRequest`, decide with
 * `applyToKeyState` where the state lives.
 */
export interface EncodedStoreRequest {
  prefix: string
  key: string
  rules: readonly EncodedRule[]
  /** Whole units (0 for `reset`). */
  cost: number
  /** A refund's decision time (ms). */
  at?: number
  /** The limiter's penalty, as `[after, within, block, factor, maxBlock]` (ms). */
  penalty?: readonly [number, number, number, number, number]
  /** The limiter's override scope (`StoreTarget.overrides`): the key's override record is read under it. */
  overrides?: string
  /** A charge's `maxDebt` (`StoreRequest.maxDebt`), when the call sets one. */
  maxDebt?: number
  /**
   * With plans (`StoreTarget.plan`): the plan's JSON as the state records it (`PlanTerms.recorded`), or '' for the
   * plan the state recorded (an operator's read).
   */
  plan?: string
}

/**
 * One client's state under one limiter, as a remote store keeps it: plain data (structured clone keeps it;
 * typed arrays included), opaque to the store. Dropped once `expiresAt` (ms, the deciding side's clock) has passed.
 */
export interface KeyState {
  /** One state per rule, in rule order. */
  states: unknown[]
  /** The penalty state, when the limiter has a penalty. */
  penalty?: unknown
  expiresAt: number
  /** With plans: the plan the last call that wrote recorded (its name and limits). */
  plan?: PlanInForce
}

/** What `applyToKeyState` gives back: the answer, and the state to keep (`undefined`: delete it). */
export interface KeyStateResult {
  /** For `consume` and `peek`. */
  decision?: Decision
  /** For `charge`: the units charged. */
  charged?: number
  /** The new state to keep; `undefined` when nothing is left to keep (the key may be deleted). */
  state: KeyState | undefined
  /** Whether `state` differs from the one given: write it (or delete the key) when true. */
  changed: boolean
}

/** Encodes a store call (`consume`, `peek`, `refund`, `charge`, `give` or `reset`) as plain data. */
export function encodeStoreRequest(request: StoreTarget | StoreRequest | RefundRequest): EncodedStoreRequest {
  const { overrides } = request
  const encoded: EncodedStoreRequest = {
    prefix: request.prefix,
    key: request.key,
    rules: request.rules.map((rule): EncodedRule => {
      const [p0, p1, p2] = rule.script.params
      const calendar = quotaCalendar(rule)
      if (calendar !== undefined) return [rule.algorithm, rule.id, p0, p1, p2, rule.name, 0, calendar]
      return overrides === undefined
        ? [rule.algorithm, rule.id, p0, p1, p2]
        : [rule.algorithm, rule.id, p0, p1, p2, rule.name, rateWindowOf(rule)]
    }),
    cost: (request as StoreRequest).cost ?? 0,
  }
  if (overrides !== undefined) encoded.overrides = overrides
  const { plan } = request
  if (plan !== undefined) encoded.plan = plan instanceof RecordedPlans ? '' : plan.recorded
  const { at } = request as RefundRequest
  if (at !== undefined) encoded.at = at
  const { maxDebt } = request as StoreRequest
  if (maxDebt !== undefined) encoded.maxDebt = maxDebt
  const { penalty } = request
  if (penalty !== undefined)
    encoded.penalty = [penalty.after, penalty.within, penalty.block, penalty.factor, penalty.maxBlock]
  return encoded
}

/**
 * The name of the state a call addresses, unique per limiter prefix, rule set and client key (the key as
 * `MemoryStore` holds it: `storedClientId`).
 */
export function keyStateId(request: Pick<EncodedStoreRequest, 'prefix' | 'key' | 'rules'>): string {
  const key = storedClientId(request.key)
  return `${request.prefix}\u0000${request.rules.map((rule) => rule[1]).join(',')}\u0000${key}`
}

/** The rules rebuilt from their parameters, by the factories (validated there), cached per parameter set. */
const rebuilt = new Map<string, Rule[]>()
const MAX_REBUILT = 1_000

function decodeRules(encoded: readonly EncodedRule[]): Rule[] {
  const signature = encoded
    .map((rule) => (rule[7] === undefined ? rule.join(':') : JSON.stringify(rule)))
    .join('|')
  let rules = rebuilt.get(signature)
  if (rules === undefined) {
    rules = encoded.map(decodeRule)
    if (rebuilt.size >= MAX_REBUILT) rebuilt.delete(rebuilt.keys().next().value!)
    rebuilt.set(signature, rules)
  }
  return rules
}

function decodeRule([algorithm, , p0, p1, p2, name, window, calendar]: EncodedRule): Rule {
  // The policy name, where an override may name the rule.
  const named = name === undefined ? {} : { name }
  switch (algorithm) {
    case 'fixed-window':
      return fixedWindow({ limit: p0, window: p1, ...named })
    case 'sliding-window-log':
      return slidingWindowLog({ limit: p0, window: p1, ...named })
    case 'sliding-window-counter':
      return slidingWindowCounter({ limit: p0, window: p1, ...named })
    case 'token-bucket':
      return tokenBucket({ capacity: p0, refillRate: p1, interval: p2, ...named })
    case 'gcra':
      // With its window, the rule as coded (an override's limit is per that window). Without, the parameters are
      // already reduced (scale and interval have no common divisor): the same logic.
      return window
        ? gcra({ limit: (p0 * window) / p1, window, burst: p2, ...named })
        : gcra({ limit: p0, window: p1, burst: p2 })
    case 'quota':
      if (calendar === undefined) break
      return quotaRule(p0, calendar, name, false)
  }
  throw new RateLimitError('ERR_RATEWINDOW_STORE', `Unknown algorithm in a store request: ${algorithm}`)
}

function decodePenalty(encoded: EncodedStoreRequest['penalty']): Penalty | undefined {
  if (encoded === undefined) return undefined
  const [after, within, block, factor, maxBlock] = encoded
  return { after, within, block, factor, maxBlock, statusCode: undefined }
}

/**
 * Runs one call on a client's stored state, exactly as `MemoryStore` decides (the same per-key steps, key-state.ts:
 * all rules at once, the penalty in the same step): `state` is what was stored (`undefined`: nothing), `now` the
 * deciding side's time (ms), `record` the key's override record at `now` (`liveOverrideRecord`; a request with
 * `overrides` reads it from the same storage), whose limits and block the step decides with. Synchronous and pure
 * but for `state`, which it may change in place: run it where the state cannot change meanwhile (inside a Durable
 * Object, between reading and writing the state). The decision is plain data: under an override, the calling side
 * makes the rules in force again (`remoteDecision`).
 */
export function applyToKeyState(
  operation: 'consume' | 'peek' | 'refund' | 'charge' | 'give',
  request: EncodedStoreRequest,
  state: KeyState | undefined,
  now: number,
  record?: OverrideRecord,
): KeyStateResult {
  const rules = decodeRules(request.rules)
  const penalty = decodePenalty(request.penalty)
  // The stored penalty state is the one `consumeKey` wrote: opaque to the store, not to the steps.
  const live = liveAt(state as KeyStateData | undefined, now)
  if (record?.limits !== undefined) record = { ...record, limits: sameLimits(rules, record.limits) }
  // With plans: the request's plan (recorded with the state by a call that writes), or the one the state recorded
  // (this storage is the object's own: what it recorded, the calling side's limiter wrote).
  const recordedRead = request.plan === ''
  const requested = request.plan === undefined || recordedRead ? undefined : planOfJson(rules, request.plan)
  const planned = (target: KeyStateData | undefined, writes: boolean) =>
    samePlan(rules, recordedRead ? target?.plan : planOf(requested, target, writes))
  switch (operation) {
    case 'peek': {
      // The stored state stays as it was (a peeked time may lie ahead of a later call's).
      const plan = planned(live, false)
      const decision = peekKey(rules, live, now, request.cost, penalty, record, plan)
      return { decision: plain(decision, plan), state, changed: false }
    }
    case 'consume': {
      const next = live ?? fresh(rules)
      const plan = planned(next, true)
      const inForce = tuneKey(rules, next, record, now, plan)
      const decision = consumeKey(inForce, next, now, request.cost, penalty, undefined, record?.block)
      return {
        decision: plain(underOverride(decision, rules, inForce, record, plan), plan),
        ...kept(inForce, penalty, next, now),
      }
    }
    case 'refund':
    case 'give': {
      if (live === undefined) return { state, changed: false }
      const inForce = tuneKey(rules, live, record, now, planned(live, false))
      if (operation === 'give') giveKey(inForce, live, now, request.cost)
      else refundKey(inForce, live, now, request.cost, request.at ?? now)
      return kept(inForce, penalty, live, now)
    }
    case 'charge': {
      const next = live ?? fresh(rules)
      const plan = planned(next, true)
      const inForce = tuneKey(rules, next, record, now, plan)
      const { charged } = chargeKey(inForce, next, now, request.cost, request.maxDebt)
      return { charged, ...kept(inForce, penalty, next, now) }
    }
  }
}

/** Per rule set, the plans read from their JSON (`EncodedStoreRequest.plan`). */
const plansSeen = new WeakMap<readonly Rule[], Map<string, PlanInForce | undefined>>()

/** The plan a request's JSON names (one object per JSON and rule set: its limits make their rules once). */
function planOfJson(rules: readonly Rule[], json: string): PlanInForce | undefined {
  let byJson = plansSeen.get(rules)
  if (byJson === undefined) {
    byJson = new Map()
    plansSeen.set(rules, byJson)
  }
  if (byJson.has(json)) return byJson.get(json)
  const plan = samePlan(rules, readRecordedPlan(json, rules))
  if (byJson.size >= MAX_REBUILT) byJson.delete(byJson.keys().next().value!)
  byJson.set(json, plan)
  return plan
}

/** `plan` with its limits as one object per rule set and JSON (`sameLimits`): a stored plan is a new object per read. */
function samePlan(rules: readonly Rule[], plan: PlanInForce | undefined): PlanInForce | undefined {
  if (plan?.limits === undefined) return plan
  const limits = sameLimits(rules, plan.limits)
  return limits === plan.limits ? plan : { name: plan.name, limits }
}

/**
 * A decision as plain data: without the rules in force (rules made elsewhere; the calling side has its own), with
 * the limits of the plan applied (`Decision.planLimits`), which the calling side makes them from.
 */
function plain(decision: Decision, plan: PlanInForce | undefined): Decision {
  if (plan?.limits !== undefined) decision.planLimits = plan.limits
  if (decision.rules === undefined) return decision
  const { rules: _, ...rest } = decision
  return rest
}

/**
 * A decision `applyToKeyState` answered, made whole on the calling side: under an override, the rules in force
 * (`Decision.rules`), made again from the request's own rules with the override it carries.
 */
export function remoteDecision(request: StoreTarget, decision: Decision): Decision {
  const { rules } = request
  const override = decision.override === undefined ? undefined : sameLimits(rules, decision.override)
  const plan = decision.planLimits === undefined ? undefined : sameLimits(rules, decision.planLimits)
  delete decision.planLimits
  const limits = limitsInForce(override, plan)
  if (limits !== undefined) {
    const inForce = rulesWith(rules, limits)
    if (inForce !== rules) decision.rules = inForce
  }
  return decision
}

/** Per rule set, override limits by their JSON (`sameLimits`). */
const limitsSeen = new WeakMap<readonly Rule[], Map<string, LimitOverride>>()

/**
 * One object per override of a rule set: a record read from storage, or an override off the wire, is a new object
 * each time, and the rules made again under an override are cached per object (`rulesWith`), so that each is made
 * once rather than at every call (a few factory calls per decision otherwise).
 */
function sameLimits(rules: readonly Rule[], limits: LimitOverride): LimitOverride {
  let byJson = limitsSeen.get(rules)
  if (byJson === undefined) {
    byJson = new Map()
    limitsSeen.set(rules, byJson)
  }
  const json = JSON.stringify(limits)
  const seen = byJson.get(json)
  if (seen !== undefined) return seen
  if (byJson.size >= MAX_REBUILT) byJson.delete(byJson.keys().next().value!)
  byJson.set(json, limits)
  return limits
}

/** A fresh state to store (no penalty field until a penalty is kept: the stored shape stays as small as it was). */
function fresh(rules: readonly Rule[]): KeyStateData {
  return { states: freshStates(rules), expiresAt: 0 }
}

/** The state to keep after a step that changed it: with its new expiry, or nothing when all of it is fresh again. */
function kept(
  rules: readonly Rule[],
  penalty: Penalty | undefined,
  state: KeyStateData,
  now: number,
): { state: KeyState | undefined; changed: true } {
  return { state: keepKey(rules, penalty, state, now) ? state : undefined, changed: true }
}

/** A client's in-flight leases as a remote store keeps them: lease id → expiry (ms). */
export type LeaseState = Record<string, number>

/**
 * An `acquire` on a client's stored leases, as `MemoryStore` does it (the same step, key-state.ts): expired leases
 * are dropped, and the new one is added when fewer than `limit` are held. Returns the answer and the leases to
 * keep (`undefined`: none).
 */
export function acquireLease(
  leases: LeaseState | undefined,
  request: Pick<LeaseRequest, 'id' | 'limit' | 'leaseMs'>,
  now: number,
): { decision: LeaseDecision; leases: LeaseState | undefined } {
  const held = new Map<string, number>()
  for (const id in leases) held.set(id, leases[id]!)
  const decision = acquireLeaseIn(held, request, now)
  return { decision, leases: held.size === 0 ? undefined : Object.fromEntries(held) }
}

/** A `release` on a client's stored leases: the leases to keep (`undefined`: none). */
export function releaseLease(leases: LeaseState | undefined, id: string): LeaseState | undefined {
  if (leases === undefined || leases[id] === undefined) return leases
  const { [id]: _, ...rest } = leases
  return Object.keys(rest).length === 0 ? undefined : rest
}
