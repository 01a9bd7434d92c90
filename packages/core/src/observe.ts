import type { LimitOverride, ManualBlock, OverrideRecord } from './algorithms/override.js'
import type { Rule } from './algorithms/types.js'
import type { DecisionSource, RateLimitResult, RuleResult } from './result.js'
import { guardedObserver } from './support/report.js'

/**
 * Every outcome of a decision, the one list observers and OpenTelemetry report (`DecisionOutcome`):
 * - `'allowed'`: admitted by the store, the fallback store, or a shadow rule's limiter that found room;
 * - `'limited'`: refused by the rules, through the store, the fallback store or the blocked-key cache (see
 *   `source`);
 * - `'blocked'`: refused by a `penalty` block (`result.blocked`; the denial that starts a block included): the
 *   answer has `penalty.statusCode`;
 * - `'delayed'`: over the limit, but admitted later: it waited for its reserved slot (`delay`, `wait()`) or was
 *   slowed down (`slowDown()`);
 * - `'shadow-limited'`: the rules would have refused it, but shadow mode let it through;
 * - `'failed-open'`: no store answered and `onStoreError: 'allow'` let it through;
 * - `'failed-closed'`: no store answered and `onStoreError: 'deny'` refused it (adapters answer 503);
 * - `'shed'`: too many decisions were waiting for the store (RedisStore `maxWaiting`): refused without a store
 *   call (adapters answer 429 with a `Retry-After` of about one round trip); or, in `slowDown()`, too many
 *   delayed requests were waiting (`maxPerKey`, `maxWaiting`): counted, then refused (429 with a `Retry-After` of
 *   the delay it would have waited; `source` is where it was counted).
 */
export const DECISION_OUTCOMES = [
  'allowed',
  'limited',
  'blocked',
  'delayed',
  'shadow-limited',
  'failed-open',
  'failed-closed',
  'shed',
] as const

/** What became of a request: one of `DECISION_OUTCOMES`. */
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number]

/** One decision of `limit()` (not of `peek()`). */
export interface DecisionEvent {
  /** The limiter's `name` (default: its namespace in the store). */
  limiter: string
  /**
   * The reported rule's name: on a denial the rule that blocks longest; for `'shadow-limited'`, the shadow rule
   * that would have blocked longest.
   */
  rule: string
  outcome: DecisionOutcome
  /**
   * Where the answer came from: `'store'`, `'fallback'`, `'policy'` (failure policy), `'cache'` (blocked keys) or
   * `'shed'` (too many waiting for the store).
   */
  source: DecisionSource
  /** The route as the framework knows it (`'/users/:id'`), when the decision came through an adapter. */
  route?: string
  /** The whole result (holds the client key: keep it out of metric labels). */
  result: RateLimitResult
  /**
   * Set when the key's override record decided (`overrides: true`): `'limits'` when an override set the limits in
   * force, `'block'` when a manual block refused it.
   */
  override?: 'limits' | 'block'
  /** With `plans`: the plan that decided (`result.plan`), a name among the limiter's plans. */
  plan?: string
  /**
   * Set on an admitted decision when the key has used a rule's `warnAt` share of its limit, else the limiter's `nearLimit` share (80 % by
   * default), once per key and rule window in this process (N processes may each send one): time to warn the
   * client before refusing it.
   */
  nearLimit?: NearLimit
  /**
   * Every rule this decision brought near its limit, in rule order (`nearLimit` is the first): a per-minute rule and a
   * monthly quota may cross in one decision, and each is signalled once.
   */
  nearLimits?: NearLimit[]
}

/** The rule a key is near the limit of (`DecisionEvent.nearLimit`). */
export interface NearLimit {
  /** The rule's name. */
  rule: string
  /** The rule's limit in force. */
  limit: number
  /** What the rule still admits after this decision. */
  remaining: number
}

/**
 * The event of one decision, the same shape from every limiter (`RateLimiter`, `slowDown()`): `rule` is the
 * reported rule's name, and `route` is set only when known.
 */
export function decisionEvent(
  limiter: string,
  rule: string,
  outcome: DecisionOutcome,
  result: RateLimitResult,
  route: string | undefined,
): DecisionEvent {
  const event: DecisionEvent = { limiter, rule, outcome, source: result.source, result }
  if (route !== undefined) event.route = route
  if (result.plan !== undefined) event.plan = result.plan
  if (result.manualBlock !== undefined) event.override = 'block'
  else if (result.overridden === true) event.override = 'limits'
  return event
}

/** What failed, for `onError`. */
export interface FailureContext {
  operation: 'consume' | 'peek' | 'refund' | 'settle' | 'fallback' | 'acquire' | 'release'
  key: string
  /**
   * The failure domain of the request when the store names one (`store.failureDomainOf`, e.g. a Cluster node or
   * slot): each domain has its own circuit breaker. Absent for a store without domains and for fallback failures.
   */
  domain?: string | number
  /** @deprecated `domain`, the same value; this name stays until 1.0. */
  scope?: string | number
  /**
   * The limiter's `name` (default: its namespace), so that a log line says which limiter failed. Set for every
   * failure a limiter's store calls report.
   */
  limiter?: string
}

/**
 * The event of one decision of a limiter (`limit()`, `wait()`, the HTTP engine's), its outcome read from the
 * result, and the rule it reports (for `'shadow-limited'`, the shadow rule that would have refused longest).
 */
export function outcomeEvent(
  limiter: string,
  result: RateLimitResult,
  route: string | undefined,
): DecisionEvent {
  const outcome: DecisionOutcome =
    result.delay !== undefined
      ? 'delayed'
      : result.shadow
        ? 'shadow-limited'
        : result.source === 'shed'
          ? 'shed'
          : result.source === 'policy'
            ? result.allowed
              ? 'failed-open'
              : 'failed-closed'
            : result.allowed
              ? 'allowed'
              : result.blocked !== undefined
                ? 'blocked'
                : 'limited'
  const rule = result.shadow ? wouldLimit(result).name : result.rule.name
  return decisionEvent(limiter, rule, outcome, result, route)
}

/** The shadow rule that would have refused a shadow-limited request longest. */
function wouldLimit(result: RateLimitResult): Rule {
  let blocking: RuleResult | undefined
  for (const outcome of result.rules) {
    if (!outcome.allowed && (blocking === undefined || outcome.retryAfter > blocking.retryAfter))
      blocking = outcome
  }
  return (blocking ?? result).rule
}

/** Where a store call went and why it failed. */
export type StoreErrorKind = 'timeout' | 'key' | 'scope'

/** One call to the store or the fallback store for a decision. */
export interface StoreCallEvent {
  limiter: string
  /** `'store'` or `'fallback'`. */
  store: 'store' | 'fallback'
  operation: 'consume' | 'peek'
  /**
   * Wall time of the call, ms (fractional). For a store that groups decisions (RedisStore), the time of the
   * Redis call that carried this decision, from sending to its answer: the wait for the group is `waitedMs`.
   */
  durationMs: number
  /**
   * RedisStore only: time the decision waited for its group (behind a call in flight to its node) before its own
   * call was sent, ms; 0 when it was sent at once.
   */
  waitedMs?: number
  /**
   * RedisStore only: decisions in the Redis call that carried this one (1 when sent alone; 0 when it was answered
   * while still waiting, by a failure of the call ahead). A call of n decisions is reported n times, once per
   * decision to its own limiter's observer: weigh by 1 / groupSize to count calls.
   */
  groupSize?: number
  /** The failure, when the call failed. */
  error?: unknown
  /**
   * `'timeout'` (no answer within `timeout`), `'key'` (an error about one key's data, e.g. `WRONGTYPE`) or
   * `'scope'` (the server or shard failed: connection, `CLUSTERDOWN`, `OOM`…). Set with `error`.
   */
  errorKind?: StoreErrorKind
}

export type BreakerState = 'closed' | 'open' | 'half-open'

/** A circuit breaker changed state. */
export interface BreakerEvent {
  limiter: string
  store: 'store' | 'fallback'
  /** The failure domain (`store.failureDomainOf`, e.g. a Cluster node); `''` for the whole store. */
  domain: string | number
  /** @deprecated `domain`, the same value; this name stays until 1.0. */
  scope: string | number
  from: BreakerState
  to: BreakerState
}

/** What an operator changed on a key (`RateLimiter.operator`: `set`, `delete`, `block`, `unblock`, `give`, `take`). */
export type OverrideAction = 'set' | 'delete' | 'block' | 'unblock' | 'give' | 'take'

/**
 * An override change or a manual action, told once the store applied it. Who made it is in `actor` when the
 * caller said (the `actor` option; `@ratewindow/admin` passes what `authorize` returned).
 */
export interface OverrideEvent {
  /** The limiter's `name`. */
  limiter: string
  key: string
  action: OverrideAction
  /** `'set'`: the override as given. */
  override?: LimitOverride
  /** `'block'`: the block as the store keeps it (its end on the store's clock, its reason). */
  block?: ManualBlock
  /** `'give'` and `'take'`: the units asked; `units` of `'take'` are those charged. */
  units?: number
  /** The key's record as the store keeps it after the change; undefined when nothing is left. */
  record?: OverrideRecord | undefined
  /** Who made the change, as given in the `actor` option of `set`, `delete`, `block` or `unblock`. */
  actor?: string
}

/**
 * Callbacks that watch a limiter. Each is optional; none can hurt a request: a throw or a rejection is caught
 * and reported as a process warning (at most one per 10 s). Unused, they cost one property check per call.
 * `@ratewindow/otel` turns them into OpenTelemetry metrics.
 */
export interface RateLimitObserver {
  onDecision?: (event: DecisionEvent) => unknown
  onStoreCall?: (event: StoreCallEvent) => unknown
  onBreaker?: (event: BreakerEvent) => unknown
  /** An override change or a manual action (`overrides: true`, or `give`/`take`). */
  onOverride?: (event: OverrideEvent) => unknown
}

/**
 * One observer that calls each given one in order, for each callback any of them has: e.g. the plugin's metrics
 * and a route's own logging (`observer: combineObservers(rateLimitMetrics(), { onDecision: log })`). `undefined`
 * entries are skipped. A throw in one does not stop the others: each is caught and reported as a process
 * warning, as for a single observer.
 */
export function combineObservers(...observers: (RateLimitObserver | undefined)[]): RateLimitObserver {
  const list = observers.filter((observer): observer is RateLimitObserver => observer !== undefined)
  const combined: RateLimitObserver = {}
  for (const name of ['onDecision', 'onStoreCall', 'onBreaker', 'onOverride'] as const) {
    // Each guarded on its own: one that throws neither stops the next nor hides its failure.
    const callbacks = list.flatMap((observer) => {
      const callback = observer[name] as ((event: never) => unknown) | undefined
      const each = guardedObserver(callback?.bind(observer), name)
      return each === undefined ? [] : [each]
    })
    if (callbacks.length === 0) continue
    combined[name] = ((event: never) => {
      for (const callback of callbacks) callback(event)
    }) as never
  }
  return combined
}
