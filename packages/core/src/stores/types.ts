import type { LimitOverride, ManualBlock, OverrideChange, OverrideRecord } from '../algorithms/override.js'
import type { Penalty } from '../algorithms/penalty.js'
import type { PlanTerms, RecordedPlans } from '../algorithms/plans.js'
import type { OutcomeRecord, Rule, RuleOutcome } from '../algorithms/types.js'

export type Awaitable<T> = T | Promise<T>

/** Addresses the state of one client under one limiter. */
export interface StoreTarget {
  /** The limiter's namespace (`RateLimiter` option `prefix`). */
  prefix: string
  /** The client identifier, any string (hashed by stores that need bounded keys). */
  key: string
  /** The rules checked together, all-or-nothing. */
  rules: readonly Rule[]
  /**
   * @internal The limiter's penalty (`RateLimiter` option `penalty`), kept beside the rules' state and decided
   * in the same atomic step. Only stores with `penalties: true` receive one.
   */
  penalty?: Penalty
  /**
   * The limiter's override scope (`RateLimiter` option `overrides`), for a store with `overrides: true`: the store
   * reads the key's override record under it in the same call that decides (`Store.updateOverride`), and decides
   * with the limits in force and any manual block. Absent: no record is read.
   */
  overrides?: string
  /**
   * With `overrides`, for a store with `plans: true`: the key's plan (`RateLimiter` option `plans`). The store
   * decides with its limits under the key's override (`limitsInForce`) and, on a call that writes (consume, charge,
   * reserve), records it beside the key's state when the recorded one differs (or is half way to its end).
   * `RecordedPlans`: the plan the store recorded for the key, with its limits as the limiter's plans give them (an
   * operator's read: `peek`, `peekStored`). Absent: no plan (the coded rules).
   */
  plan?: PlanTerms | RecordedPlans
}

export interface StoreRequest extends StoreTarget {
  /** Whole units the request costs. */
  cost: number
  /**
   * Reservation (`delay`, `RateLimiter.wait`), for `consume` of a store with `reservations: true`: the longest
   * wait (ms) a request over the limit may be given. When every rule admits it within that wait, the store charges
   * it now for that time (its slot is reserved) and answers `allowed` with `wait`; beyond it, denied as usual.
   */
  reserve?: number
  /**
   * For `charge`: the most units each rule may be left owing beyond its limit (a whole number), at most what the rule
   * carries (`AlgorithmLogic.carriedDebt`: one limit on the sliding windows). Absent: each rule's `limit` (one window;
   * the token bucket's capacity, GCRA's burst), the settle's default; 0: only what every rule still admits, never
   * more (the operator's `take`).
   */
  maxDebt?: number
}

export interface RefundRequest extends StoreRequest {
  /** The `at` of the decision being refunded (ms, the store's clock). */
  at: number
}

/** A store's answer: one outcome per rule, in the order of `rules`. */
export interface Decision {
  allowed: boolean
  /** Decision time in epoch ms, from the store's clock (Redis: the server's `TIME` by default). */
  now: number
  outcomes: RuleOutcome[]
  /** With a penalty: how long (ms) the key stays blocked, when it is; absent otherwise. */
  blocked?: number
  /**
   * Reservation: the request was charged for a slot this many ms after `now` (always > 0); absent when it was
   * admitted now or denied. A refund of it passes `at` = `now` + `wait`.
   */
  wait?: number
  /**
   * Faults the store found and dealt with while deciding, for `onError`: a key of the wrong type or unreadable
   * content rewritten from a fresh state, a key without a TTL given one, a Redis that evicts keys. The decision
   * stands; the limiter passes each to `onError`.
   */
  notices?: readonly Error[]
  /**
   * With `StoreTarget.overrides`: the rules in force, in the order of `rules`, when an override changed any
   * (the outcomes are theirs); absent when the coded rules decided.
   */
  rules?: readonly Rule[]
  /** With `StoreTarget.overrides`: the override in force for the key, when there is one. */
  override?: LimitOverride
  /** With `StoreTarget.overrides`: the manual block in force, when the key is blocked (the request was refused). */
  manualBlock?: ManualBlock
  /** With `StoreTarget.plan`: the name of the plan the decision applied (the recorded one, for `RecordedPlans`). */
  plan?: string
  /**
   * @internal A remote store's (remote.ts): the limits of the plan it applied, for the calling side to make the rules
   * in force again.
   */
  planLimits?: LimitOverride
}

/** What `Store.charge` answers. */
export interface Charged {
  /** The units charged. */
  charged: number
  /** Faults the store found and dealt with (`Decision.notices`). */
  notices?: readonly Error[]
  /**
   * The rules' outcomes after the charge, in the order of `rules`, as an admitted decision reports them (`retryAfter`:
   * the wait until a cost-1 request passes, 0 while one still would). Optional: without them, the limiter peeks once
   * after a charge that left a rule at its limit, so that a settled result's waits are true.
   */
  outcomes?: RuleOutcome[]
  /** The time of the charge in epoch ms, from the store's clock, with `outcomes`: their waits are from it. */
  now?: number
}

/** One page of `Store.listOverrides`. */
export interface OverridePage {
  records: OverrideRecord[]
  /** Pass it back for the next page; undefined when the scan is done. */
  cursor: string | undefined
}

/** What a key of a store holds (`StoredKey.part`). */
export type StoredPart =
  | { kind: 'rule'; ruleId: string }
  | { kind: 'penalty' }
  | { kind: 'override' }
  | { kind: 'lease' }
  | { kind: 'plan' }

/** A key a store keeps, read back (`decodeStoredKey`, `Store.scanStored`). */
export interface StoredKey {
  /** The key as the store names it: RedisStore's Redis key as found; MemoryStore's namespace and client id. */
  key: string
  /** The limiter's namespace (or override scope) it lives under, without the store's prefix. */
  namespace: string
  /**
   * The client key as the store holds it, which `peekStored` reads: RedisStore's hash tag (`storedHash`);
   * MemoryStore's client id (the key itself, or `#` and its SHA-256 when longer than 128 characters).
   */
  hash: string
  part: StoredPart
  /** The raw client key, where the store holds it (an override record's, a MemoryStore key kept as it is). */
  raw?: string
}

/** One step of `Store.scanStored`. */
export interface StoredKeyPage {
  /** The keys of the store's naming read in this step. */
  keys: StoredKey[]
  /** Keys read in this step that the store's naming does not decode (another application's): not in `keys`. */
  foreign: number
  /** Pass it back for the next step; undefined when the scan is done. */
  cursor: string | undefined
}

/**
 * Where rate limit state lives. `MemoryStore` and `RedisStore` implement it and pass one conformance suite:
 * the same trace gives the same decisions. Implementations must apply a request to all rules atomically.
 */
export interface Store {
  /** Decides and, when every rule admits the request, records it in all of them. */
  consume(request: StoreRequest, within?: CallBound): Awaitable<Decision>
  /** The decision `consume` would give now, writing nothing. */
  peek(request: StoreRequest, within?: CallBound): Awaitable<Decision>
  /** Gives back the cost of an admitted request (for `skipFailedRequests` and friends). */
  refund(request: RefundRequest, within?: CallBound): Awaitable<void>
  /**
   * Charges `cost` to every rule now, in full as far as it leaves no rule more than `request.maxDebt` units past its
   * limit: the largest k <= `cost` such that each rule would admit k − maxDebt. A rule taken past its limit owes the
   * units above it until they have passed at its rate (`AlgorithmLogic.consume`): nothing is admitted meanwhile,
   * `remaining` reads 0 and `retryAfter` counts the debt. For `RateLimiter.settle` (an actual cost above the
   * estimate) and the operator's `take` (`maxDebt: 0`). A manual block does not stop it. Returns the units charged,
   * faults dealt with as in `Decision.notices`, and, where the store has them, the rules' outcomes after the charge
   * (`Charged.outcomes`: the settled result's waits and headers follow them; without, the limiter peeks once after a
   * charge that left a rule at its limit). Optional: without it, `settle` reports an error to `onError` and charges
   * nothing.
   */
  charge?(request: StoreRequest, within?: CallBound): Awaitable<Charged>
  /** Forgets the client's state for these rules. */
  reset(target: StoreTarget): Awaitable<void>
  /**
   * The failure domain of a request: what fails together with it, such as the Cluster node (or slot) holding
   * its keys. The limiter keeps one circuit breaker per domain, so a dead shard affects only its own keys.
   * Omit it, or return `undefined`, when everything fails together (one server, one process).
   */
  failureDomainOf?(target: StoreTarget): string | number | undefined
  /** @deprecated `failureDomainOf`, read when a store has only this; this name stays until 1.0. */
  scopeOf?(target: StoreTarget): string | number | undefined
  /**
   * Whether the store keeps penalties (the `penalty` of a request) atomically beside the rule state. The
   * limiter refuses a `penalty` with a store that does not.
   */
  readonly penalties?: boolean
  /**
   * Whether the store decides `quota` rules with their calendar periods (the rule's own in JavaScript, or the
   * bounds computed for them in the deciding process). The limiter refuses a quota rule with a store that does not.
   */
  readonly quotas?: boolean
  /**
   * Whether the store decides with a key's plan (`StoreTarget.plan`) and records it beside the key's state in the
   * same call. The limiter refuses `plans` with a store that does not.
   */
  readonly plans?: boolean
  /**
   * Whether the store reserves slots (`StoreRequest.reserve`) atomically in its `consume`. The limiter refuses
   * `delay` and `wait()` with a store that does not.
   */
  readonly reservations?: boolean
  /**
   * Whether the store keeps overrides and manual blocks (`updateOverride`, `readOverride`, `listOverrides`) and
   * reads them in the same call that decides (`StoreTarget.overrides`). The limiter refuses `overrides.set` and
   * `block` with a store that does not, naming it.
   */
  readonly overrides?: boolean
  /**
   * Applies `change` to the record of `key` under `scope` atomically, on the store's clock
   * (`applyOverrideChange`), keeping it until its last part ends; returns the record as it stands after.
   */
  updateOverride?(scope: string, key: string, change: OverrideChange): Awaitable<OverrideRecord | undefined>
  /** The record of `key` under `scope`, ended parts dropped; undefined when there is none. */
  readOverride?(scope: string, key: string): Awaitable<OverrideRecord | undefined>
  /** A page of the records under `scope` (`count` is a hint); may scan. */
  listOverrides?(scope: string, page: { cursor?: string | undefined; count: number }): Awaitable<OverridePage>
  /**
   * One step of a scan of every key the store keeps (`count` is a hint): for an operator's tools (`scanStored`,
   * `topStored`, `overrides.top`), never for requests. RedisStore: a script running SCAN on each master in turn.
   */
  scanStored?(page: { cursor?: string | undefined; count: number }): Awaitable<StoredKeyPage>
  /**
   * The decision `peek` would give for the client key held as `hash` (`StoredKey.hash`; `request.key` is not read
   * again): a key found by `scanStored`, known only as the store holds it. Changes nothing.
   */
  peekStored?(request: StoreRequest, hash: string): Awaitable<Decision>
  /**
   * Gives up to `cost` units back to every rule now, without a result in hand (`RateLimiter.give`), each rule as
   * far as it holds them (never below empty).
   */
  give?(request: StoreRequest, within?: CallBound): Awaitable<void>
  /** Releases timers or connections the store owns. */
  close?(): Awaitable<unknown>
  /**
   * True for a store that queues and groups its calls (RedisStore): it bounds each call's wait itself, from the
   * moment the call is sent, given a `CallBound` as the second argument of `consume`, `peek`, `refund` and
   * `charge` (and of `acquire` and `release`, for a `ConcurrencyStore`); the limiter then sets no timer of its own, so that time spent waiting behind the store's own queue
   * never counts as a store failure. Other stores leave it out and ignore the second argument.
   */
  readonly boundsWait?: boolean
  /**
   * @internal A store that decides in this process, at once (MemoryStore): `consume`, written into the caller's
   * reused record instead of answered as a `Decision`, so that the common decision allocates nothing. Answers false,
   * having changed nothing, for a request it leaves to `consume` (overrides, reservations); throws as `consume`
   * does. Custom stores leave it out: the limiter then calls `consume`.
   */
  decideInto?(request: StoreRequest, into: DecisionRecord): boolean
}

/**
 * A caller-owned record of one decision over in-process states (`Store.decideInto`): reused by its owner from one
 * decision to the next, so that the decision allocates nothing.
 * @internal
 */
export interface DecisionRecord extends OutcomeRecord {
  allowed: boolean
  /** Decision time in epoch ms, from the store's clock. */
  now: number
  /** With a penalty: how long (ms) the key stays blocked; 0 when it is not. */
  blocked: number
  /** Reservation: the request was charged for a slot this many ms after `now`; 0 when none. */
  wait: number
}

/**
 * How long a call of a store with `boundsWait` may take once sent, and where a late reply goes. `T` is the reply:
 * a `Decision` for `consume`, a `LeaseDecision` for `acquire`.
 */
export interface CallBound<T = Decision> {
  /** Longest wait for the call once sent, ms: then it rejects with `ERR_RATEWINDOW_STORE_TIMEOUT`. */
  timeoutMs: number
  /**
   * Receives the reply of a call that the store applied after it timed out: a consume's decision (for late
   * refunds), an acquire's lease (released then: its release may have reached the store before it). `lose`, when
   * given, receives the failure of such a call that fails after it timed out (its connection closed): the store may
   * or may not have applied it.
   */
  late?: { arrive(reply: T): void; lose?(error: unknown): void } | undefined
  /** Given when the limiter reports store calls (`onStoreCall`): the store fills it in when the call is sent. */
  call?: CallReport | undefined
}

/** What a grouping store tells about the call that carried one decision (`StoreCallEvent`). */
export interface CallReport {
  /** Time the decision waited for its group before its call was sent, ms (0: sent at once). */
  waitedMs: number
  /** Decisions in the call that carried it; 0 while it was never sent (answered while still waiting). */
  groupSize: number
}

/** One lease request: a slot for `id` under `key`, held until released or until `leaseMs` has passed. */
export interface LeaseRequest {
  prefix: string
  key: string
  /** Unique per request: released by this id. */
  id: string
  /** Most leases held at once for the key. */
  limit: number
  /** How long a lease lives unless released: a crashed process's slots come back after it. */
  leaseMs: number
}

/** A store's answer to `acquire`. */
export interface LeaseDecision {
  allowed: boolean
  /** Leases held now, this one included when allowed. */
  inFlight: number
  /** When the earliest lease held expires, from now (ms); 0 when none is held. */
  nextExpiry: number
}

/**
 * Where in-flight leases live: `MemoryStore` and `RedisStore` implement it. Expired leases are dropped on every
 * acquire, so a process that died holding slots gives them back after the lease time.
 */
export interface ConcurrencyStore {
  /** `within` is given to a store with `boundsWait` (see `Store.boundsWait`); others ignore it. */
  acquire(request: LeaseRequest, within?: CallBound<LeaseDecision>): Awaitable<LeaseDecision>
  release(request: Omit<LeaseRequest, 'limit'>, within?: CallBound): Awaitable<void>
  readonly boundsWait?: boolean
}
