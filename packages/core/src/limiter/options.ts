import { type Penalty, type PenaltyOptions, parsePenalty } from '../algorithms/penalty.js'
import { type PlanSet, resolvePlans } from '../algorithms/plans.js'
import { isRule } from '../algorithms/rule.js'
import type { Rule } from '../algorithms/types.js'
import type { CircuitBreakerOptions } from '../gateway/circuit-breaker.js'
import type { FailureContext, RateLimitObserver } from '../observe.js'
import { defaultMemoryStore } from '../stores/local/memory.js'
import type { Store } from '../stores/types.js'
import { type Duration, parseTimerDuration } from '../support/duration.js'
import { invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { throttledErrorLog } from '../support/report.js'
import { fnOption, oneOf, prefixOption, wholeNumber } from '../support/validators.js'
import type { BlockedCacheOptions } from './blocked-cache.js'
import { type Identity, namespaceOf, overrideScopeOf, parseGroup } from './namespaces.js'
import { parseNearLimit } from './near-limit.js'
import { checkStores } from './store-checks.js'

// http/ and slow-down/ import `FailureContext` from here until milestone 2 moves their imports to observe.ts.
export type { FailureContext } from '../observe.js'

/** Validates `rules`: one rule or a non-empty array of rules with distinct storage ids and policy names. */
export function parseRules(rules: unknown): readonly Rule[] {
  const list = Array.isArray(rules) ? rules : [rules]
  if (list.length === 0)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'rules', rules, 'a rule or a non-empty array of rules')
  const ids = new Set<string>()
  const names = new Set<string>()
  list.forEach((rule: unknown, i) => {
    if (!isRule(rule)) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        Array.isArray(rules) ? `rules[${i}]` : 'rules',
        rule,
        'a rule made by fixedWindow, slidingWindowLog, slidingWindowCounter, tokenBucket or gcra (a copy such as { ...rule } is not one: pass `name` to the factory instead)',
      )
    }
    if (ids.has(rule.id)) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_DUPLICATE_RULE',
        `\`rules[${i}]\` repeats a ${rule.algorithm} rule with the same window; merge them or change one window.`,
        { option: `rules[${i}]` },
      )
    }
    ids.add(rule.id)
    // RateLimit headers and problem details name policies: two rules with one name could not be told apart.
    if (names.has(rule.name)) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_DUPLICATE_RULE',
        `\`rules[${i}].name\` repeats the policy name ${JSON.stringify(rule.name)}; give each rule its own \`name\`.`,
        { option: `rules[${i}].name` },
      )
    }
    names.add(rule.name)
  })
  return Object.freeze([...list])
}

export interface RateLimiterOptions {
  /** One rule or several; a request must pass all of them, and one denied by any consumes from none. */
  /** The rules checked together, all or nothing. Required unless `plans` gives them. */
  rules?: Rule | readonly Rule[]
  /**
   * Named rule sets of one shape, e.g. `{ free: [...], pro: [...] }` (docs/plans-and-quotas.md): the first plan's
   * rules are the coded rules, and each other plan differs in its limits only (position by position the same
   * algorithm and window). A request names its plan (`limiter.limit(key, { plan })`, the middleware's `plan`); the
   * store records the plan in force beside the key's state in the call that decides, so a plan change keeps the
   * period's usage and the operator tools show each key's plan and limits. Plans read the key's override record as
   * `overrides: true` does. Instead of `rules`. @default none
   */
  plans?: Record<string, Rule | readonly Rule[]>
  /**
   * The plan of a request whose plan is not one of `plans` (or not given); without it such a request is refused
   * with `ERR_RATEWINDOW_UNKNOWN_PLAN`. @default none
   */
  defaultPlan?: string
  /** Where state lives. @default new MemoryStore() */
  store?: Store
  /**
   * Prepended to this limiter's namespace in the store (e.g. one per application sharing a Redis). Limiters
   * with different rules never share counters; two with the same rules on one store need different prefixes
   * or one `group`. See docs/counters.md. @default 'rw'
   */
  prefix?: string
  /**
   * Share one budget on purpose: every limiter of this group on one store counts into the same counters
   * (they must have the same rules). @default none: the limiter counts on its own
   */
  group?: string
  /** Longest wait for an asynchronous store before the failure policy answers instead. @default '250ms' */
  timeout?: Duration
  /**
   * When the store fails or times out (and no `fallback` answers): `'allow'` lets the request through
   * (fail open), `'deny'` refuses it (fail closed; adapters answer 503). `wait()` and `schedule()` refuse unless
   * it is set to `'allow'` here or in their own options (docs/waiting.md). @default 'allow'
   */
  onStoreError?: 'allow' | 'deny'
  /**
   * A decision shed by a store that bounds its waiting decisions (RedisStore's `maxWaiting`: a flood in this
   * process): `'limit'` answers it as limited (429 with a `Retry-After` of about one round trip, `source: 'shed'`);
   * `'fallback'` answers it as a store failure would (the `fallback` store, else `onStoreError`), though it is
   * not one: no breaker counts it and `onError` does not receive it. @default 'limit'
   */
  onShed?: 'limit' | 'fallback'
  /** A store that answers while the main one fails, e.g. `new MemoryStore()`: limits per process meanwhile. */
  fallback?: Store
  /**
   * Receives every store failure. It cannot hurt a request: a throw or a rejection is caught and reported as a
   * process warning (`RATEWINDOW_ONERROR_FAILED`). @default a throttled console.error per limiter: the first
   * failure, then at most one line per 10 s while failures continue, with the count of those not written
   * (docs/operations.md)
   */
  onError?: (error: unknown, context: FailureContext) => unknown
  /**
   * Stop waiting on a store that keeps failing, and probe it again later; `false` to disable. Kept per failure
   * domain (`store.failureDomainOf`: a Cluster node), so a dead shard does not send the healthy ones to the policy;
   * errors about one key's data (`WRONGTYPE`, a script error) never open it. The fallback store has one
   * breaker of its own with the same settings. @default {}
   */
  circuitBreaker?: CircuitBreakerOptions | false
  /**
   * Remember denied keys until their `retryAfter` passes and answer them without a store call. Worth it with
   * Redis under floods; uses local time, so leave it off when the store's clock is simulated. @default false
   */
  blockedCache?: BlockedCacheOptions | boolean
  /** This limiter's name in observer events and metrics (`ratewindow.limiter`). @default its namespace */
  name?: string
  /**
   * Shadow mode for every rule: decide and count, report `result.shadow` and the outcome `'shadow-limited'`,
   * but let the request through (docs/rollout.md). A rule's own `shadow: true` does the same for one rule.
   * @default false
   */
  shadow?: boolean
  /** Callbacks for decisions, store calls and circuit breaker changes (docs/operations.md). @default none */
  observer?: RateLimitObserver
  /**
   * The share of a rule's limit used (above 0, at most 1) at which an admitted decision's event says the key is
   * near its limit (`DecisionEvent.nearLimit`), once per key and rule window in this process (up to 10,000 keys
   * remembered per limiter; N processes may each signal once). Computed only when `observer.onDecision` is set;
   * `false` turns it off (docs/operations.md). @default 0.8
   */
  nearLimit?: number | false
  /**
   * The furthest ahead a slot is reserved (`wait()`, `schedule()`, the HTTP `delay`): a call whose earliest slot
   * is further away is refused as beyond its `maxWait`, whatever that asks, and nothing is reserved. It bounds what
   * a process killed while its calls wait, or a Redis restarted without persistence, can cost: the slots reserved
   * ahead, at most this long of the limit, left empty or handed out again (docs/waiting.md). At most '24d'.
   * @default '1m'
   */
  reservationHorizon?: Duration
  /**
   * Block a key that keeps being denied: after `after` denials within `within`, every request of the key is
   * denied for `block` (each repeat `factor` times longer, up to `maxBlock`). Kept atomically beside the rule
   * state by the store (MemoryStore, RedisStore); `reset` clears it. @default none
   */
  penalty?: PenaltyOptions
  /**
   * Overrides and manual blocks per key (`limiter.operator`: `set`, `block`, `unblock`; docs/operating-limits.md): the
   * store keeps one record per client key under this limiter's `prefix` and `group` (or `name`), and every
   * decision reads it in the same store call. Off, decisions read nothing and cost nothing more. Needs a store
   * that keeps them (MemoryStore, RedisStore, SyncedStore, the Durable Object store). @default false
   */
  overrides?: boolean
  /**
   * The most units a `settle` may leave each rule owing beyond its limit. An actual cost above the estimate is
   * charged in full, and a rule taken past its limit owes the excess until it has passed at the rule's rate
   * (docs/policies.md): nothing of the key passes meanwhile, `remaining` reads 0 and `Retry-After` counts the debt.
   * A rule never owes more than it carries (the sliding windows one limit; SyncedStore's fixed window one limit, and
   * nothing while it carries a debt already). Only what these bounds leave out is `uncharged`. A whole number; 0
   * charges only what the rules still admit.
   * @default each rule's `limit`: one window (the token bucket's capacity, GCRA's burst)
   */
  maxDebt?: number
}

/** The limiter's option names other than `rules`: the middleware options share them (http/options.ts). */
export const LIMITER_OPTION_FLAGS = {
  store: true,
  prefix: true,
  group: true,
  timeout: true,
  onStoreError: true,
  onShed: true,
  fallback: true,
  onError: true,
  circuitBreaker: true,
  blockedCache: true,
  name: true,
  shadow: true,
  observer: true,
  nearLimit: true,
  penalty: true,
  reservationHorizon: true,
  overrides: true,
  maxDebt: true,
  plans: true,
  defaultPlan: true,
} as const satisfies Record<Exclude<keyof RateLimiterOptions, 'rules'>, true>
const RATE_LIMITER_NAMES = namesOf<RateLimiterOptions>({ rules: true, ...LIMITER_OPTION_FLAGS })
const OBSERVER_NAMES = namesOf<RateLimitObserver>({
  onDecision: true,
  onStoreCall: true,
  onBreaker: true,
  onOverride: true,
})
const CIRCUIT_BREAKER_NAMES = namesOf<CircuitBreakerOptions>({ failures: true, cooldown: true, clock: true })
const BLOCKED_CACHE_NAMES = namesOf<BlockedCacheOptions>({ maxKeys: true, clock: true })

/** The defaults of `RateLimiter`, in one place. */
export const LIMITER_DEFAULTS = {
  prefix: 'rw',
  timeout: '250ms',
  onStoreError: 'allow',
  onShed: 'limit',
  circuitBreaker: {},
  blockedCache: false,
  reservationHorizon: '1m',
} as const satisfies Partial<RateLimiterOptions>

/** `RateLimiterOptions` resolved: every default filled in, every value checked. */
export interface LimiterConfig {
  rules: readonly Rule[]
  store: Store
  prefix: string
  group: string | undefined
  /** Where this limiter's counters live in the store (see namespaces.ts). */
  namespace: string
  timeoutMs: number
  allowOnError: boolean
  /** The policy of `wait()` and `schedule()` on a store failure: `onStoreError` when set, else `'deny'`. */
  waitOnStoreError: 'allow' | 'deny'
  /** `onShed: 'fallback'`: a shed decision is answered like a store failure. */
  shedToFallback: boolean
  fallback: Store | undefined
  onError: (error: unknown, context: FailureContext) => unknown
  circuitBreaker: CircuitBreakerOptions | false
  blockedCache: BlockedCacheOptions | false
  name: string
  shadow: boolean
  observer: RateLimitObserver | undefined
  /** `nearLimit`: the share of a limit used that signals, or `false`. */
  nearLimit: number | false
  /** The parsed `penalty`, if any. */
  penalty: Penalty | undefined
  /** `reservationHorizon` in ms. */
  reservationHorizonMs: number
  /**
   * With `overrides: true` (or `plans`): the scope of the limiter's override records in its store
   * (`overrideScopeOf`).
   */
  overrides: string | undefined
  /** The parsed `plans`, if any. */
  plans: PlanSet | undefined
  /** `maxDebt`; undefined: each rule's limit. */
  maxDebt: number | undefined
}

/**
 * Parses `reservationHorizon`; with `within`, checks that a bound given in another option (the middleware's
 * `delay.max`) is not beyond it.
 */
export function parseReservationHorizon(
  value: unknown = LIMITER_DEFAULTS.reservationHorizon,
  within?: { option: string; ms: number },
): number {
  const horizonMs = parseTimerDuration(value, 'reservationHorizon')
  if (within !== undefined && within.ms > horizonMs) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`${within.option}\` (${within.ms} ms) is beyond the limiter's \`reservationHorizon\` (${horizonMs} ms), which bounds every reservation: lower \`${within.option}\` or raise \`reservationHorizon\`.`,
      { option: within.option },
    )
  }
  return horizonMs
}

/** Resolves and validates `RateLimiter` options; throws a `RateLimitError` naming the first bad option. */
export function resolveLimiterOptions(options: RateLimiterOptions, identity: Identity = {}): LimiterConfig {
  requireObject(options, 'options', '{ rules: slidingWindowCounter(...) }')
  rejectUnknownOptions(options, RATE_LIMITER_NAMES, 'RateLimiter')
  const plans = resolvePlans(options, parseRules)
  const rules = plans?.rules ?? parseRules(options.rules)
  const {
    store = defaultMemoryStore(),
    prefix = LIMITER_DEFAULTS.prefix,
    timeout = LIMITER_DEFAULTS.timeout,
    onStoreError = LIMITER_DEFAULTS.onStoreError,
    onShed = LIMITER_DEFAULTS.onShed,
    fallback,
    onError = throttledErrorLog(),
    circuitBreaker = LIMITER_DEFAULTS.circuitBreaker,
    blockedCache = LIMITER_DEFAULTS.blockedCache,
  } = options
  if (!isStore(store)) throw notAStore('store', store)
  prefixOption(prefix, 64)
  const group = parseGroup(options.group)
  oneOf(onStoreError, 'onStoreError', ['allow', 'deny'])
  oneOf(onShed, 'onShed', ['limit', 'fallback'])
  if (fallback !== undefined && !isStore(fallback)) throw notAStore('fallback', fallback)
  fnOption(onError, 'onError')
  if (circuitBreaker !== false) {
    if (typeof circuitBreaker !== 'object' || circuitBreaker === null) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'circuitBreaker',
        circuitBreaker,
        'an object like { failures: 5, cooldown: "2s" }, or false',
      )
    }
    rejectUnknownOptions(circuitBreaker, CIRCUIT_BREAKER_NAMES, '`circuitBreaker`')
  }
  if (typeof blockedCache !== 'boolean') {
    if (typeof blockedCache !== 'object' || blockedCache === null) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'blockedCache',
        blockedCache,
        'true, false, or an object like { maxKeys: 10000 }',
      )
    }
    rejectUnknownOptions(blockedCache, BLOCKED_CACHE_NAMES, '`blockedCache`')
  }
  const { name, shadow = false, observer } = options
  if (name !== undefined && (typeof name !== 'string' || name.length === 0 || name.length > 128)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'name',
      name,
      'a non-empty string of at most 128 characters',
    )
  }
  if (typeof shadow !== 'boolean')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'shadow', shadow, 'true or false')
  if (observer !== undefined) {
    if (typeof observer !== 'object' || observer === null) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'observer',
        observer,
        'an object like { onDecision(event) {} }',
      )
    }
    rejectUnknownOptions(observer, OBSERVER_NAMES, '`observer`')
    for (const callback of OBSERVER_NAMES) {
      const value = (observer as Record<string, unknown>)[callback]
      if (value !== undefined) fnOption(value, `observer.${callback}`)
    }
  }
  const namespace = namespaceOf(prefix, rules, group, identity)
  const penalty = parsePenalty(options.penalty)
  checkStores(store, fallback, penalty, rules, plans !== undefined)
  const overrides = parseOverrides(options.overrides, store) || plans !== undefined
  const { maxDebt } = options
  if (maxDebt !== undefined) wholeNumber(maxDebt, 'maxDebt', { min: 0 })
  return {
    maxDebt,
    plans,
    overrides: overrides ? overrideScopeOf(prefix, group, name, identity) : undefined,
    name: name ?? namespace,
    shadow,
    observer,
    nearLimit: parseNearLimit(options.nearLimit),
    rules,
    store,
    prefix,
    group,
    namespace,
    timeoutMs: parseTimerDuration(timeout, 'timeout'),
    allowOnError: onStoreError === 'allow',
    waitOnStoreError: options.onStoreError ?? 'deny',
    shedToFallback: onShed === 'fallback',
    fallback,
    onError,
    circuitBreaker,
    blockedCache: blockedCache === true ? {} : blockedCache,
    penalty,
    reservationHorizonMs: parseReservationHorizon(options.reservationHorizon),
  }
}

/** Validates `overrides`: a boolean, true only with a store that keeps overrides. */
function parseOverrides(value: unknown, store: Store): boolean {
  if (value === undefined || value === false) return false
  if (value !== true) throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'overrides', value, 'true or false')
  if (store.overrides !== true) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`overrides\` needs a store that keeps overrides and reads them as it decides (MemoryStore, RedisStore, SyncedStore, DurableObjectStore); the \`store\` (${store.constructor?.name ?? typeof store}) does not.`,
      { option: 'overrides' },
    )
  }
  return true
}

const USE_OURS =
  'With ratewindow use `new RedisStore({ client })` from @ratewindow/core (or your adapter), which takes your Redis ' +
  'client itself (ioredis, node-redis, iovalkey or Valkey GLIDE), or `new MemoryStore()`.'

/**
 * The error for a `store` or `fallback` that is not a Store: it names the library a peer's store comes from
 * (the same class name, `RedisStore`, is easily imported from the wrong package) and what to use instead.
 */
function notAStore(option: string, value: unknown): RateLimitError {
  const has = (name: string) =>
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Record<string, unknown>)[name] === 'function'
  const from =
    has('increment') && has('resetKey')
      ? has('sendCommand') || 'sendCommand' in (value as object)
        ? "rate-limit-redis's RedisStore, a store for express-rate-limit"
        : 'a store for express-rate-limit (`increment`, `decrement`, `resetKey`)'
      : has('incr') && has('child')
        ? 'a store for @fastify/rate-limit (`incr`, `child`)'
        : has('consume') && has('block') && has('penalty')
          ? 'a rate-limiter-flexible limiter'
          : value instanceof Map
            ? "a Map (koa-ratelimit's memory `db`)"
            : undefined
  if (from === undefined)
    return invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, 'a Store such as new MemoryStore()')
  return new RateLimitError(
    'ERR_RATEWINDOW_INVALID_OPTION',
    `\`${option}\` is ${from}: its stores count differently and cannot decide for ratewindow. ${USE_OURS}`,
    { option },
  )
}

function isStore(value: unknown): value is Store {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Store).consume === 'function' &&
    typeof (value as Store).peek === 'function'
  )
}
