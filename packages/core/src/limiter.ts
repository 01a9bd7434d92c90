import { LOG_MAX_COST } from './algorithms/sliding-window-log.js'
import type { Rule } from './algorithms/types.js'
import { isThenable } from './awaitable.js'
import { BlockedCache } from './blocked-cache.js'
import { describeValue, invalid, RateLimitError } from './errors.js'
import { CircuitBreaker, failureKind, guardedReporter, ScopedBreakers, withTimeout } from './failure.js'
import { claimNamespace, type Identity } from './namespaces.js'
import type { BreakerEvent, BreakerState, DecisionEvent, StoreCallEvent } from './observe.js'
import { guardedObserver } from './observe.js'
import { type FailureContext, type RateLimiterOptions, resolveLimiterOptions } from './options.js'
import type { Penalty } from './penalty.js'
import { policyResult, type RateLimitResult, type RuleResult, toResult } from './result.js'
import type { Awaitable, Decision, Store, StoreRequest } from './stores/types.js'

/** The scope of every request when the store names none (one server, or a store that cannot tell). */
const WHOLE_STORE = ''

/** What `settle` did. */
export interface SettleResult {
  /** Units charged on top of the estimate (at most what the rules still admitted: never below zero). */
  charged: number
  /** Units of the estimate given back (by the refund rules of each algorithm). */
  refunded: number
  /** Units of the actual cost above the estimate that could not be charged (the quota was spent). */
  uncharged: number
}

export interface LimitOptions {
  /** Whole units this request costs; 0 checks without consuming. @default 1 */
  cost?: number
  /** The route, for observer events only (adapters pass the framework's route pattern). */
  route?: string
}

/**
 * Applies rules to client identifiers through a store.
 * @example
 * const limiter = new RateLimiter({ rules: slidingWindowCounter({ limit: 100, window: '1m' }) })
 * const result = await limiter.limit('user:alice')
 * if (!result.allowed) console.log(`retry in ${result.retryAfter} ms`)
 */
export class RateLimiter {
  readonly rules: readonly Rule[]
  readonly store: Store
  /** The `prefix` option. */
  readonly prefix: string
  /** The `group` option: limiters of one group on one store share one budget. */
  readonly group: string | undefined
  /** Where this limiter's counters live in its store: derived from `prefix`, `group` and the rules. */
  readonly namespace: string
  /** The largest cost every rule accepts (the smallest limit, or a rule's own cap): no cost above it passes. */
  readonly maxCost: number
  /** The `name` option: this limiter in observer events (default: its namespace). */
  readonly name: string
  /** The `shadow` option: every rule counts and reports, none refuses. */
  readonly shadow: boolean
  /** Rules that enforce (not in shadow mode); empty for a shadow limiter. */
  readonly #enforcing: readonly Rule[]
  /** The rules in shadow mode when others enforce: decided by a store call of their own. */
  readonly #shadowRules: readonly Rule[]
  /** Whether every rule is in shadow mode (the limiter's `shadow`, or each rule's). */
  readonly #allShadow: boolean
  readonly #onDecision: ((event: DecisionEvent) => void) | undefined
  readonly #onStoreCall: ((event: StoreCallEvent) => void) | undefined
  readonly #onBreaker: ((event: BreakerEvent) => void) | undefined
  /** @internal The parsed `penalty`, if any. */
  readonly penalty: Penalty | undefined
  readonly #timeout: number
  readonly #allowOnError: boolean
  readonly #fallback: Store | undefined
  readonly #onError: (error: unknown, context: FailureContext) => void
  readonly #breakers: ScopedBreakers | undefined
  readonly #fallbackBreaker: CircuitBreaker | undefined
  readonly #blocked: BlockedCache | undefined
  readonly #release: () => void

  /**
   * @param identity @internal How the HTTP engine scopes the limiter (a Fastify route, a `limit` function).
   */
  constructor(options: RateLimiterOptions, identity: Identity = {}) {
    const config = resolveLimiterOptions(options, identity)
    this.rules = config.rules
    this.store = config.store
    this.prefix = config.prefix
    this.group = config.group
    this.namespace = config.namespace
    this.maxCost = Math.min(...this.rules.map((rule) => rule.maxCost))
    this.name = config.name
    this.shadow = config.shadow
    const enforcing = config.shadow ? [] : this.rules.filter((rule) => !rule.shadow)
    this.#allShadow = enforcing.length === 0
    this.#enforcing = Object.freeze(enforcing)
    this.#shadowRules =
      this.#allShadow || enforcing.length === this.rules.length
        ? []
        : Object.freeze(this.rules.filter((rule) => rule.shadow))
    this.#onDecision = guardedObserver(config.observer?.onDecision, 'onDecision')
    this.#onStoreCall = guardedObserver(config.observer?.onStoreCall, 'onStoreCall')
    this.#onBreaker = guardedObserver(config.observer?.onBreaker, 'onBreaker')
    this.penalty = config.penalty
    this.#timeout = config.timeoutMs
    this.#allowOnError = config.allowOnError
    this.#fallback = config.fallback
    this.#onError = guardedReporter(config.onError)
    const { circuitBreaker } = config
    this.#breakers = circuitBreaker === false ? undefined : new ScopedBreakers(circuitBreaker)
    this.#fallbackBreaker =
      circuitBreaker === false || config.fallback === undefined
        ? undefined
        : new CircuitBreaker(circuitBreaker)
    this.#blocked = config.blockedCache === false ? undefined : new BlockedCache(config.blockedCache)
    this.#release = claimNamespace(this.store, this.namespace, this.rules, this.group, identity.owner ?? this)
  }

  /**
   * Gives up this limiter's claim on its namespace, so that another limiter of this process may count there
   * (e.g. an app rebuilt in tests). The limiter itself keeps working.
   */
  release(): void {
    this.#release()
  }

  /**
   * Decides for one request of `key` and records it when allowed. Never rejects for a store failure, nor for
   * an `onError` that throws; rejects only for a bad `key` or `cost` (a programming error).
   */
  limit(key: string, options?: LimitOptions): Promise<RateLimitResult> {
    try {
      return Promise.resolve(this.limitNow(key, options))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * `limit` without a promise when the store answers synchronously (the memory store): the HTTP adapters'
   * path, which saves a promise and a microtask per layer. Throws (instead of rejecting) for a bad `key` or
   * `cost`; otherwise as `limit`.
   * @internal
   */
  limitNow(key: string, options?: LimitOptions): Awaitable<RateLimitResult> {
    const request = this.#request(key, options?.cost)
    const mixed = this.#shadowRules.length > 0
    const route = options?.route
    const cached = this.#blocked?.get(key, request.cost)
    if (cached !== undefined) return this.#finishLimit(request, cached, mixed, route)
    const decided = this.#decide(mixed ? { ...request, rules: this.#enforcing } : request, 'consume')
    if (isThenable(decided)) return decided.then((result) => this.#afterStore(request, result, mixed, route))
    return this.#afterStore(request, decided, mixed, route)
  }

  #afterStore(
    request: StoreRequest,
    result: RateLimitResult,
    mixed: boolean,
    route: string | undefined,
  ): Awaitable<RateLimitResult> {
    if (!result.allowed && result.source === 'store') this.#blocked?.set(request.key, result)
    return this.#finishLimit(request, result, mixed, route)
  }

  /** Shadow rules and observers, after the enforcing decision. */
  #finishLimit(
    request: StoreRequest,
    result: RateLimitResult,
    mixed: boolean,
    route: string | undefined,
  ): Awaitable<RateLimitResult> {
    if (mixed) {
      return this.#addShadowRules(request, result, 'consume').then((withShadow) =>
        this.#reported(withShadow, route),
      )
    }
    if (this.#allShadow && !result.allowed)
      return this.#reported({ ...result, allowed: true, retryAfter: 0, shadow: true }, route)
    return this.#reported(result, route)
  }

  #reported(result: RateLimitResult, route: string | undefined): RateLimitResult {
    if (this.#onDecision !== undefined) this.#reportDecision(result, route)
    return result
  }

  /**
   * Shadow rules next to enforcing ones are decided by a second store call, made only when the enforcing rules
   * admitted the request (a refused request counts nowhere, as with all rules together). Their denial marks the
   * result `shadow`; `rules` then lists every rule in rule order. A store failure of the shadow call is
   * reported to `onError` and changes nothing.
   */
  async #addShadowRules(
    request: StoreRequest,
    enforced: RateLimitResult,
    operation: 'consume' | 'peek',
  ): Promise<RateLimitResult> {
    if (!enforced.allowed || enforced.source === 'policy') return enforced
    // A penalty follows the enforcing rules only: shadow denials neither count towards it nor see its block.
    const { penalty: _, ...unpenalised } = request
    const shadow = await this.#decide({ ...unpenalised, rules: this.#shadowRules }, operation)
    if (shadow.source === 'policy') return enforced
    let e = 0
    let h = 0
    const rules: RuleResult[] = this.rules.map((rule) =>
      rule.shadow ? shadow.rules[h++]! : enforced.rules[e++]!,
    )
    return shadow.allowed ? { ...enforced, rules } : { ...enforced, rules, shadow: true }
  }

  /** The rule sets that have counters of their own in the store: two when shadow and enforcing rules mix. */
  #ruleSets(): readonly (readonly Rule[])[] {
    return this.#shadowRules.length > 0 ? [this.#enforcing, this.#shadowRules] : [this.rules]
  }

  /** The result `limit` would give now, without consuming anything. */
  async peek(key: string, options?: LimitOptions): Promise<RateLimitResult> {
    const request = this.#request(key, options?.cost)
    if (this.#shadowRules.length === 0) {
      const result = await this.#decide(request, 'peek')
      return this.#allShadow && !result.allowed
        ? { ...result, allowed: true, retryAfter: 0, shadow: true }
        : result
    }
    const enforced = await this.#decide({ ...request, rules: this.#enforcing }, 'peek')
    return this.#addShadowRules(request, enforced, 'peek')
  }

  /**
   * A shadow limiter's shadow-limited request was refused by its rules, so nothing was charged: there is nothing
   * to give back (refund) or to settle either way.
   */
  #chargedNothing(result: Pick<RateLimitResult, 'shadow'>): boolean {
    return this.#allShadow && result.shadow === true
  }

  /**
   * Gives back an admitted request, e.g. one whose response should not count. Pass its result. Waits at most
   * `timeout`; a failure is reported to `onError`, never thrown.
   */
  async refund(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'allowed' | 'source' | 'shadow'>,
  ): Promise<void> {
    if (!result.allowed || result.cost === 0 || result.source === 'policy') return
    if (this.#chargedNothing(result)) return
    const request = this.#request(result.key, result.cost)
    this.#blocked?.delete(result.key)
    const store = result.source === 'fallback' ? this.#fallback : this.store
    if (store === undefined) return
    // Shadow rules next to enforcing ones counted the request only when they admitted it.
    const sets = this.#shadowRules.length > 0 && result.shadow ? [this.#enforcing] : this.#ruleSets()
    for (const rules of sets) {
      try {
        await withTimeout(
          call(() => store.refund({ ...request, rules, at: result.at })),
          this.#timeout,
          'store.refund',
        )
      } catch (error) {
        this.#onError(error, { operation: 'refund', key: result.key })
      }
    }
  }

  /**
   * Reserve-then-settle: the request was admitted with an estimated `cost`; now its actual cost is known (e.g.
   * LLM tokens used). A smaller actual cost gives the difference back (the refund rules of each algorithm); a
   * larger one charges the difference at once, atomically, up to what the rules still admit (never below
   * zero: the rest is reported as `uncharged`). Settle a result once. `result.cost` becomes what is charged now,
   * so that a later `refund(result)` gives back the right amount. Waits at most `timeout`; a store failure is
   * reported to `onError` and nothing is charged. Throws only for a bad `actualCost`.
   */
  async settle(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'allowed' | 'source' | 'shadow'>,
    actualCost: number,
  ): Promise<SettleResult> {
    if (typeof actualCost !== 'number' || !Number.isSafeInteger(actualCost) || actualCost < 0) {
      throw invalid('ERR_RATEWINDOW_INVALID_COST', 'actualCost', actualCost, 'a whole number >= 0')
    }
    const none = { charged: 0, refunded: 0, uncharged: Math.max(0, actualCost - result.cost) }
    if (!result.allowed || actualCost === result.cost || result.source === 'policy') return none
    if (this.#chargedNothing(result)) return none
    const store = result.source === 'fallback' ? this.#fallback : this.store
    if (store === undefined) return none
    checkKey(result.key)
    const base = this.#request(result.key, 0)
    this.#blocked?.delete(result.key)
    if (actualCost < result.cost) {
      const refunded = result.cost - actualCost
      try {
        await withTimeout(
          call(() => store.refund({ ...base, cost: refunded, at: result.at })),
          this.#timeout,
          'store.refund',
        )
      } catch (error) {
        this.#onError(error, { operation: 'refund', key: result.key })
        return none
      }
      result.cost = actualCost
      return { charged: 0, refunded, uncharged: 0 }
    }
    const extra = actualCost - result.cost
    try {
      if (typeof store.charge !== 'function') {
        throw new RateLimitError(
          'ERR_RATEWINDOW_STORE',
          'This store cannot charge a settled cost (it has no `charge`); the difference was not charged.',
        )
      }
      const { charged, notices } = await withTimeout(
        call(() => store.charge!({ ...base, cost: extra })),
        this.#timeout,
        'store.charge',
      )
      for (const notice of notices ?? []) this.#onError(notice, { operation: 'settle', key: result.key })
      result.cost += charged
      return { charged, refunded: 0, uncharged: extra - charged }
    } catch (error) {
      this.#onError(error, { operation: 'settle', key: result.key })
      return none
    }
  }

  /**
   * Forgets everything about `key` (in the fallback store too). Rejects with the store's error, or with
   * `ERR_RATEWINDOW_STORE_TIMEOUT` when a store takes longer than `timeout`.
   */
  async reset(key: string): Promise<void> {
    checkKey(key)
    this.#blocked?.delete(key)
    const resets = [this.store, this.#fallback].flatMap((store) =>
      store === undefined
        ? []
        : this.#ruleSets().map((rules) =>
            withTimeout(
              call(() => store.reset({ prefix: this.namespace, key, rules })),
              this.#timeout,
              store === this.store ? 'store.reset' : 'fallback.reset',
            ),
          ),
    )
    await Promise.all(resets)
    this.#blocked?.delete(key)
  }

  #reportDecision(result: RateLimitResult, route: string | undefined): void {
    const outcome = result.shadow
      ? 'shadow-limited'
      : result.source === 'policy'
        ? result.allowed
          ? 'failed-open'
          : 'failed-closed'
        : result.allowed
          ? 'allowed'
          : 'limited'
    const event: DecisionEvent = {
      limiter: this.name,
      rule: result.shadow ? wouldLimit(result).name : result.rule.name,
      outcome,
      source: result.source,
      result,
    }
    if (route !== undefined) event.route = route
    this.#onDecision!(event)
  }

  #reportStoreCall(
    store: 'store' | 'fallback',
    operation: 'consume' | 'peek',
    started: number,
    error?: unknown,
  ): void {
    const event: StoreCallEvent = {
      limiter: this.name,
      store,
      operation,
      durationMs: performance.now() - started,
    }
    if (error !== undefined) {
      event.error = error
      event.errorKind =
        error instanceof RateLimitError && error.code === 'ERR_RATEWINDOW_STORE_TIMEOUT'
          ? 'timeout'
          : failureKind(error)
    }
    this.#onStoreCall!(event)
  }

  /** Runs a change of a scope's breaker, reporting a change of its state to `onBreaker`. */
  #breaker<T>(scope: string | number, change: (breakers: ScopedBreakers) => T): T {
    const breakers = this.#breakers!
    if (this.#onBreaker === undefined) return change(breakers)
    const from = breakers.state(scope)
    const value = change(breakers)
    const to = breakers.state(scope)
    if (from !== to) this.#onBreaker({ limiter: this.name, store: 'store', scope, from, to })
    return value
  }

  /** The same for the fallback store's breaker. */
  #fallbackChange<T>(change: (breaker: CircuitBreaker) => T): T {
    const breaker = this.#fallbackBreaker!
    if (this.#onBreaker === undefined) return change(breaker)
    const from: BreakerState = breaker.state
    const value = change(breaker)
    const to = breaker.state
    if (from !== to) this.#onBreaker({ limiter: this.name, store: 'fallback', scope: WHOLE_STORE, from, to })
    return value
  }

  /**
   * The store's answer, or the fallback's, or the failure policy's; never a rejection for a store failure.
   * Synchronous (no promise) when the store answers synchronously and well.
   */
  #decide(request: StoreRequest, operation: 'consume' | 'peek'): Awaitable<RateLimitResult> {
    const breakers = this.#breakers
    // While no scope has failed, the healthy path computes no scope at all.
    const known = breakers === undefined || breakers.idle ? undefined : this.#scopeOf(request)
    if (known !== undefined && !this.#breaker(known, (each) => each.allows(known))) {
      return this.#withoutStore(request, operation, known, undefined)
    }
    const started = this.#onStoreCall === undefined ? 0 : performance.now()
    let pending: Awaitable<Decision>
    try {
      pending = this.store[operation](request)
      // A synchronous store (the memory store) is answered without a promise.
      if (!isThenable(pending)) return this.#storeAnswered(request, operation, pending, started, known)
    } catch (error) {
      return this.#storeFailed(request, operation, error, undefined, started, known)
    }
    return this.#awaitStore(request, operation, pending, started, known)
  }

  async #awaitStore(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    pending: PromiseLike<Decision>,
    started: number,
    known: string | number | undefined,
  ): Promise<RateLimitResult> {
    try {
      const decision = await withTimeout(pending, this.#timeout, `store.${operation}`)
      return this.#storeAnswered(request, operation, decision, started, known)
    } catch (error) {
      return this.#storeFailed(request, operation, error, pending, started, known)
    }
  }

  #storeAnswered(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    decision: Decision,
    started: number,
    known: string | number | undefined,
  ): RateLimitResult {
    if (this.#onStoreCall !== undefined) this.#reportStoreCall('store', operation, started)
    if (known !== undefined) this.#breaker(known, (each) => each.success(known))
    const { notices } = decision
    // `!= null`: a store written in JavaScript may answer `notices: null`.
    if (notices != null) for (const notice of notices) this.#onError(notice, { operation, key: request.key })
    return toResult(request, decision, 'store')
  }

  /** The store failed (threw, rejected or timed out): reported, then the fallback or the failure policy. */
  #storeFailed(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    error: unknown,
    pending: PromiseLike<Decision> | undefined,
    started: number,
    known: string | number | undefined,
  ): Promise<RateLimitResult> {
    if (this.#onStoreCall !== undefined) this.#reportStoreCall('store', operation, started, error)
    const late =
      operation === 'consume' && pending !== undefined ? [{ store: this.store, pending }] : undefined
    const scope = known ?? this.#scopeOf(request)
    // A key's own error proves the server answered: the scope is healthy.
    if (this.#breakers !== undefined) {
      if (failureKind(error) === 'key') this.#breaker(scope, (each) => each.success(scope))
      else this.#breaker(scope, (each) => each.failure(scope))
    }
    this.#onError(
      error,
      scope === WHOLE_STORE ? { operation, key: request.key } : { operation, key: request.key, scope },
    )
    return this.#withoutStore(request, operation, scope, late)
  }

  /**
   * The fallback's answer, or the failure policy's, when the store failed or its breaker is open. Both stores
   * are waited on for at most `timeout` each. A `consume` that timed out may still be applied by the store
   * later: when the request was refused (policy `'deny'`, or a denial by the fallback), such a late charge is
   * refunded as soon as it arrives; when the request was let through, it stands, since the request was served.
   */
  async #withoutStore(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    scope: string | number,
    late: { store: Store; pending: PromiseLike<Decision> }[] | undefined,
  ): Promise<RateLimitResult> {
    const breakers = this.#breakers
    let result: RateLimitResult | undefined
    const fallback = this.#fallback
    const fallbackBreaker = this.#fallbackBreaker
    if (
      fallback !== undefined &&
      (fallbackBreaker === undefined || this.#fallbackChange((b) => b.allows()))
    ) {
      let pending: Awaitable<Decision> | undefined
      const started = this.#onStoreCall === undefined ? 0 : performance.now()
      try {
        pending = fallback[operation](request)
        const decision = isThenable(pending)
          ? await withTimeout(pending, this.#timeout, `fallback.${operation}`)
          : pending
        if (this.#onStoreCall !== undefined) this.#reportStoreCall('fallback', operation, started)
        if (fallbackBreaker !== undefined) this.#fallbackChange((b) => b.success())
        result = toResult(request, decision, 'fallback')
      } catch (error) {
        if (this.#onStoreCall !== undefined) this.#reportStoreCall('fallback', operation, started, error)
        if (operation === 'consume' && isThenable(pending)) {
          late = [...(late ?? []), { store: fallback, pending }]
        }
        if (fallbackBreaker !== undefined) {
          if (failureKind(error) === 'key') this.#fallbackChange((b) => b.success())
          else this.#fallbackChange((b) => b.failure())
        }
        this.#onError(error, { operation: 'fallback', key: request.key })
      }
    }
    result ??= policyResult(request, this.#allowOnError, Math.max(1_000, breakers?.retryIn(scope) ?? 0))
    if (late !== undefined && !result.allowed) {
      for (const { store, pending } of late) this.#refundLate(store, pending, request)
    }
    return result
  }

  /** Gives back a charge that a store applied after its decision timed out, for a request that was refused. */
  #refundLate(store: Store, pending: PromiseLike<Decision>, request: StoreRequest): void {
    const refund = async (decision: Decision) => {
      if (decision?.allowed !== true || request.cost === 0) return
      try {
        await withTimeout(
          call(() => store.refund({ ...request, at: decision.now })),
          this.#timeout,
          store === this.store ? 'store.refund' : 'fallback.refund',
        )
      } catch (error) {
        this.#onError(error, { operation: 'refund', key: request.key })
      }
    }
    // A late rejection was reported already, as the timeout.
    Promise.resolve(pending).then(refund, () => {})
  }

  /** The failure scope of a request: the store's `scopeOf`, or the whole store. */
  #scopeOf(request: StoreRequest): string | number {
    if (typeof this.store.scopeOf !== 'function') return WHOLE_STORE
    try {
      const scope = this.store.scopeOf(request)
      return typeof scope === 'string' || typeof scope === 'number' ? scope : WHOLE_STORE
    } catch {
      return WHOLE_STORE
    }
  }

  #request(key: string, cost: number | undefined = 1): StoreRequest {
    checkKey(key)
    if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
      throw invalid('ERR_RATEWINDOW_INVALID_COST', 'cost', cost, 'a whole number >= 0')
    }
    if (cost > this.maxCost) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
        `\`cost\` ${cost} exceeds the largest cost the rules accept (${this.maxCost}: the smallest limit, and at most ${LOG_MAX_COST} for a sliding window log): such a request could never pass. Lower the cost or raise the limit.`,
        { option: 'cost' },
      )
    }
    return this.penalty === undefined
      ? { prefix: this.namespace, key, rules: this.rules, cost }
      : { prefix: this.namespace, key, rules: this.rules, cost, penalty: this.penalty }
  }
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

function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_KEY',
      `The key must be a string; received ${describeValue(key)}.`,
      {
        option: 'key',
      },
    )
  }
}

/** Runs a store call, turning a synchronous throw into a rejection. */
function call<T>(run: () => Awaitable<T>): Promise<T> {
  try {
    return Promise.resolve(run())
  } catch (error) {
    return Promise.reject(error)
  }
}
