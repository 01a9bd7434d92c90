import type { Penalty } from '../algorithms/penalty.js'
import { LOG_MAX_COST } from '../algorithms/sliding-window-log.js'
import type { Rule } from '../algorithms/types.js'
import { StoreFailure, StoreGateway } from '../gateway/store-gateway.js'
import type { DecisionEvent } from '../observe.js'
import {
  policyResult,
  type RateLimitResult,
  type RuleResult,
  type SettleResult,
  shedResult,
  shiftRemaining,
  toResult,
} from '../result.js'
import type { Awaitable, Decision, Store, StoreRequest } from '../stores/types.js'
import { type Duration, parseTimerDuration } from '../support/duration.js'
import { describeValue, invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { guardedObserver, guardedReporter } from '../support/report.js'
import { WaitQueue, type WaitSignal } from '../time/wait-queue.js'
import { BlockedCache } from './blocked-cache.js'
import { claimNamespace, type Identity, type NamespaceClaim, warnSuperseded } from './namespaces.js'
import { type RateLimiterOptions, resolveLimiterOptions } from './options.js'

export interface LimitOptions {
  /** Whole units this request costs; 0 checks without consuming. @default 1 */
  cost?: number
  /** The route, for observer events only (adapters pass the framework's route pattern). */
  route?: string
}

/** Options of `RateLimiter.wait` and `RateLimiter.schedule`. */
export interface WaitOptions {
  /**
   * Longest wait for a slot: when the earliest admission time is further away, `wait` rejects at once
   * (`ERR_RATEWINDOW_WAIT_EXCEEDED`) and nothing is reserved. @default '1m'
   */
  maxWait?: Duration
  /** Aborts the wait (an `AbortSignal`): it rejects with the signal's reason and the reserved slot is given back. */
  signal?: WaitSignal
  /** Whole units the call costs. @default 1 */
  cost?: number
}

/** `WaitOptions`' defaults, in one place (the `@default` tags above say the same). */
export const WAIT_DEFAULTS = { maxWait: '1m', cost: 1 } as const satisfies WaitOptions

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
  /** @internal The parsed `penalty`, if any. */
  readonly penalty: Penalty | undefined
  readonly #allowOnError: boolean
  readonly #shedToFallback: boolean
  /** Every call to the store goes through here; the fallback store has a gateway of its own. */
  readonly #store: StoreGateway
  readonly #fallback: StoreGateway | undefined
  readonly #blocked: BlockedCache | undefined
  readonly #claim: NamespaceClaim
  /** The superseded warning's advice (`Identity.sharing`). */
  readonly #sharing: string | undefined
  /** Results being settled or refunded: their calls run one after the other (see `#giveBack`). */
  readonly #givingBack = new WeakMap<object, GiveBack>()
  /** Why this limiter cannot reserve slots (`wait()`, `delay`), or undefined when it can. */
  readonly #cannotReserve: string | undefined
  /** @internal The requests of `wait()` (and the HTTP `delay`) waiting for their slots: one timer for all. */
  readonly waiting = new WaitQueue()
  /**
   * @param identity For the HTTP engine only: how it scopes the limiter (a Fastify route, a `limit` function).
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
    this.penalty = config.penalty
    this.#allowOnError = config.allowOnError
    this.#shedToFallback = config.shedToFallback
    const gateway = {
      limiter: this.name,
      timeoutMs: config.timeoutMs,
      onError: guardedReporter(config.onError),
      circuitBreaker: config.circuitBreaker,
      onStoreCall: guardedObserver(config.observer?.onStoreCall, 'onStoreCall'),
      onBreaker: guardedObserver(config.observer?.onBreaker, 'onBreaker'),
    }
    this.#store = new StoreGateway(this.store, { ...gateway, role: 'store' })
    this.#fallback =
      config.fallback === undefined
        ? undefined
        : new StoreGateway(config.fallback, { ...gateway, role: 'fallback' })
    this.#blocked = config.blockedCache === false ? undefined : new BlockedCache(config.blockedCache)
    this.#sharing = identity.sharing
    this.#claim = claimNamespace(this.store, this.namespace, this.rules, this.group, identity.owner ?? this)
    this.#cannotReserve = cannotReserve(this.store, this.#allShadow ? this.rules : this.#enforcing)
  }

  /**
   * @internal Throws, naming `option`, when this limiter cannot reserve slots: a rule whose algorithm cannot (the
   * fixed window, the sliding window counter) or a store that does not (SyncedStore).
   */
  checkReservations(option: string): void {
    if (this.#cannotReserve !== undefined) {
      throw new RateLimitError('ERR_RATEWINDOW_INVALID_OPTION', `\`${option}\`: ${this.#cannotReserve}`, {
        option,
      })
    }
  }

  /**
   * Waits until a call for `key` may go, its slot reserved in the store in the same atomic step that decided it
   * (exact across processes sharing one Redis, first come, first served within a process), and resolves with the
   * result (`result.delay`: how long it waited). Rejects at once with `ERR_RATEWINDOW_WAIT_EXCEEDED` when the
   * earliest admission is beyond `maxWait` (nothing reserved; `error.retryAfter` says when it would pass). On
   * abort, rejects with the signal's reason and gives the slot back. When the store fails, follows
   * `onStoreError`: `'allow'` resolves at once, `'deny'` rejects with `ERR_RATEWINDOW_STORE`. A shadow limiter
   * never waits (the result says `delay` and `shadow`). Needs GCRA, token bucket or sliding window log rules on a
   * MemoryStore or RedisStore (docs/waiting.md).
   * @example
   * const api = new RateLimiter({ rules: gcra({ limit: 5000, window: '1h' }), store: new RedisStore({ client }) })
   * await api.wait('github') // then call the API
   */
  async wait(key: string, options: WaitOptions = {}): Promise<RateLimitResult> {
    requireObject(options, 'options', "{ maxWait: '30s', signal }")
    rejectUnknownOptions(options, WAIT_OPTIONS, 'wait')
    const { maxWait = WAIT_DEFAULTS.maxWait, signal, cost = WAIT_DEFAULTS.cost } = options
    // 0: never wait (a slot free now, or a rejection).
    const maxWaitMs = maxWait === 0 ? 0 : parseTimerDuration(maxWait, 'maxWait')
    if (signal !== undefined && !isSignal(signal))
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'signal', signal, 'an AbortSignal')
    this.checkReservations('wait')
    if (signal?.aborted) throw signal.reason
    const result = await this.limitNow(key, { cost }, maxWaitMs)
    if (!result.allowed) {
      if (result.source === 'policy') {
        throw new RateLimitError(
          'ERR_RATEWINDOW_STORE',
          "The store failed and `onStoreError` is 'deny': no slot could be reserved.",
        )
      }
      throw new WaitExceededError(result, maxWaitMs)
    }
    const delay = result.delay ?? 0
    if (delay === 0 || result.shadow === true) {
      if (signal?.aborted) {
        await this.refund(result)
        throw signal.reason
      }
      return result
    }
    try {
      await this.waitForSlot(result, signal)
    } catch (reason) {
      // Aborted while waiting: the slot goes back, so that the next caller may take it.
      await this.refund(result)
      throw reason
    }
    return result
  }

  /**
   * @internal Waits for the reserved slot of `result` (one with `delay`), under the one timer; rejects with the
   * signal's reason on abort (the caller gives the slot back).
   */
  waitForSlot(result: RateLimitResult, signal?: WaitSignal): Promise<void> {
    const delay = result.delay ?? 0
    // Only the store's answers share its clock (a fallback store keeps its own).
    if (result.source !== 'store') return this.waiting.wait(delay, signal)
    return this.waiting.waitForSlot(result.at, delay, signal)
  }

  /**
   * Runs \`fn\` once \`wait(key, options)\` resolves, and answers what it returns: a call to a rate-limited API
   * that stays under its limit across every process sharing the store. Rejects as \`wait\` does, without calling
   * \`fn\`; a rejection of \`fn\` passes through (its slot stays spent).
   * @example await api.schedule('github', () => fetch('https://api.github.com/repos/octocat/hello-world'))
   */
  async schedule<T>(key: string, fn: () => T | PromiseLike<T>, options?: WaitOptions): Promise<T> {
    if (typeof fn !== 'function') throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'fn', fn, 'a function')
    await this.wait(key, options)
    return fn()
  }

  /**
   * Gives up this limiter's claim on its namespace: call it when the limiter goes (an app rebuilt in tests, a
   * reloaded module). A newer limiter on the same store and namespace takes the namespace over anyway; the older
   * one, if it still decides, warns once (`RATEWINDOW_SUPERSEDED_LIMITER`). The limiter itself keeps working.
   */
  release(): void {
    this.#claim.release()
  }

  /** Whether a newer limiter of this process took this one's namespace over (see `release`). */
  get superseded(): boolean {
    return this.#claim.superseded
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
  limitNow(key: string, options?: LimitOptions, reserve?: number): Awaitable<RateLimitResult> {
    if (this.#claim.superseded) warnSuperseded(this, this.name, this.namespace, this.group, this.#sharing)
    const request = this.#request(key, options?.cost)
    const mixed = this.#shadowRules.length > 0
    const route = options?.route
    const cached = this.#blocked?.get(key, request.cost)
    // A reservation asks the store unless the cached denial lasts longer than it may wait (a slot is never
    // earlier than the denial's retryAfter), or the key is blocked by a penalty.
    if (
      cached !== undefined &&
      (reserve === undefined || cached.retryAfter > reserve || cached.blocked !== undefined)
    )
      return this.#finishLimit(request, cached, mixed, route)
    // A reservation (`reserve`: the longest wait, ms) goes to the rules that enforce; shadow rules decide now.
    const sent = mixed ? { ...request, rules: this.#enforcing } : request
    const decided = this.#decide(reserve === undefined ? sent : { ...sent, reserve }, 'consume')
    if (decided instanceof Promise)
      return decided.then((result) => this.#afterStore(request, result, mixed, route))
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
    // Shadow mode reserves and reports the slot as enforcing would, but nothing waits for it.
    if (this.#allShadow && result.delay !== undefined)
      return this.#reported({ ...result, shadow: true }, route)
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
    if (shadow.source === 'policy' || shadow.source === 'shed') return enforced
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
   * `timeout`; a failure is reported to `onError`, never thrown. A result is given back at most once in this
   * process: a second `refund`, or a `settle` after it, gives back nothing; after a `settle`, the refund gives
   * back what the settle left charged (`result.cost`). Calls on one result run one after the other, in call order.
   */
  refund(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'allowed' | 'source' | 'shadow'>,
  ): Promise<void> {
    if (!result.allowed || result.cost === 0 || result.source === 'policy') return Promise.resolve()
    if (this.#chargedNothing(result)) return Promise.resolve()
    try {
      this.#request(result.key, result.cost)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#giveBack(result, (state) => this.#refund(result, state))
  }

  async #refund(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'source' | 'shadow'>,
    state: GiveBack,
  ): Promise<void> {
    if (state.refunded) return
    // Marked before the store call: a refund that times out may still be applied by the store later.
    state.refunded = true
    if (result.cost === 0) return
    const request = this.#request(result.key, result.cost)
    this.#blocked?.delete(result.key)
    const gateway = result.source === 'fallback' ? this.#fallback : this.#store
    if (gateway === undefined) return
    // Shadow rules next to enforcing ones counted the request only when they admitted it.
    const sets = this.#shadowRules.length > 0 && result.shadow ? [this.#enforcing] : this.#ruleSets()
    for (const rules of sets) await gateway.refund({ ...request, rules, at: result.at })
  }

  /**
   * Reserve-then-settle: the request was admitted with an estimated `cost`; now its actual cost is known (e.g.
   * LLM tokens used). A smaller actual cost gives the difference back (the refund rules of each algorithm); a
   * larger one charges the difference at once, atomically, up to what the rules still admit (never below
   * zero: the rest is reported as `uncharged`). `result.cost` becomes what is charged now, so that a later
   * `refund(result)` gives back the right amount, and `result.remaining` (and each rule's) follows what was
   * given back or charged. Calls on one result (`settle`, `refund`) run one after the other, in call order, and
   * each sees what the previous left: a second `settle` with the same actual cost does nothing, and a `settle` after a `refund` settles nothing. Waits at most `timeout`; a store failure is
   * reported to `onError` and nothing is charged (when giving back, the units count as given back: the store
   * may apply a call that timed out). Throws only for a bad `actualCost`. In one process only: a result handed
   * to another process is settled there without knowing what happened here.
   */
  async settle(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'allowed' | 'source' | 'shadow'> &
      Partial<Pick<RateLimitResult, 'remaining' | 'rules' | 'limit'>>,
    actualCost: number,
  ): Promise<SettleResult> {
    if (typeof actualCost !== 'number' || !Number.isSafeInteger(actualCost) || actualCost < 0) {
      throw invalid('ERR_RATEWINDOW_INVALID_COST', 'actualCost', actualCost, 'a whole number >= 0')
    }
    if (!result.allowed || result.source === 'policy' || this.#chargedNothing(result))
      return { charged: 0, refunded: 0, uncharged: Math.max(0, actualCost - result.cost) }
    checkKey(result.key)
    return this.#giveBack(result, (state) => this.#settle(result, actualCost, state))
  }

  async #settle(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'source'> &
      Partial<Pick<RateLimitResult, 'remaining' | 'rules' | 'limit'>>,
    actualCost: number,
    state: GiveBack,
  ): Promise<SettleResult> {
    const none = { charged: 0, refunded: 0, uncharged: Math.max(0, actualCost - result.cost) }
    // Refunded already: nothing of it is charged any more, and nothing more is.
    if (state.refunded || actualCost === result.cost) return none
    const gateway = result.source === 'fallback' ? this.#fallback : this.#store
    if (gateway === undefined) return none
    const base = this.#request(result.key, 0)
    this.#blocked?.delete(result.key)
    if (actualCost < result.cost) {
      const refunded = result.cost - actualCost
      const done = await gateway.refund({ ...base, cost: refunded, at: result.at })
      result.cost = actualCost
      shiftRemaining(result, refunded)
      return done ? { charged: 0, refunded, uncharged: 0 } : none
    }
    const extra = actualCost - result.cost
    const charged = await gateway.charge({ ...base, cost: extra })
    if (charged === undefined) return none
    result.cost += charged
    shiftRemaining(result, -charged)
    return { charged, refunded: 0, uncharged: extra - charged }
  }

  /**
   * Runs `call` (a settle or a refund of `result`) after the calls on the same result that came before it, so
   * that each sees what the previous left (`result.cost`, whether it was refunded): two concurrent calls never
   * give back the same units twice.
   */
  #giveBack<T>(result: object, call: (state: GiveBack) => Promise<T>): Promise<T> {
    let state = this.#givingBack.get(result)
    if (state === undefined) {
      state = { tail: undefined, refunded: false }
      this.#givingBack.set(result, state)
    }
    const own = state
    const next = own.tail === undefined ? call(own) : own.tail.then(() => call(own))
    own.tail = next.then(ignore, ignore)
    return next
  }

  /**
   * Forgets everything about `key` (in the fallback store too). Rejects with the store's error, or with
   * `ERR_RATEWINDOW_STORE_TIMEOUT` when a store takes longer than `timeout`.
   */
  async reset(key: string): Promise<void> {
    checkKey(key)
    this.#blocked?.delete(key)
    const resets = [this.#store, this.#fallback].flatMap((gateway) =>
      gateway === undefined
        ? []
        : this.#ruleSets().map((rules) => gateway.reset({ prefix: this.namespace, key, rules })),
    )
    await Promise.all(resets)
    this.#blocked?.delete(key)
  }

  #reportDecision(result: RateLimitResult, route: string | undefined): void {
    const outcome =
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

  /**
   * The store's answer, or the fallback's, or the failure policy's; never a rejection for a store failure.
   * Synchronous (no promise) when the store answers synchronously and well.
   */
  #decide(request: StoreRequest, operation: 'consume' | 'peek'): Awaitable<RateLimitResult> {
    const decided = this.#store.decide(request, operation)
    // The gateway answers a Decision, a StoreFailure, or (for an asynchronous store) a native promise of either.
    if (decided instanceof Promise) return decided.then((each) => this.#fromStore(request, operation, each))
    return this.#fromStore(request, operation, decided as Decision | StoreFailure)
  }

  #fromStore(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    decided: Decision | StoreFailure,
  ): Awaitable<RateLimitResult> {
    if (decided instanceof StoreFailure) return this.#withoutStore(request, operation, decided)
    return toResult(request, decided, 'store')
  }

  /**
   * The fallback's answer, or the failure policy's, when the store failed or its breaker is open. A `consume`
   * that timed out may still be applied by a store later: when the request was refused (policy `'deny'`, or a
   * denial by the fallback), such a late charge is refunded as soon as it arrives; when the request was let
   * through, it stands, since the request was served.
   */
  async #withoutStore(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    failure: StoreFailure,
  ): Promise<RateLimitResult> {
    // Shed by the store (too many waiting for it): not a failure; nothing was sent, nothing to refund. Limited,
    // unless `onShed: 'fallback'` asks for the answer a failure gets.
    if (failure.shedMs !== undefined && !this.#shedToFallback) return shedResult(request, failure.shedMs)
    let result: RateLimitResult | undefined
    let fallbackFailure: StoreFailure | undefined
    const fallback = this.#fallback
    if (fallback !== undefined) {
      const decided = await fallback.decide(request, operation)
      if (decided instanceof StoreFailure) fallbackFailure = decided
      else result = toResult(request, decided, 'fallback')
    }
    result ??= policyResult(request, this.#allowOnError, Math.max(1_000, this.#store.retryIn(failure.scope)))
    if (!result.allowed) {
      this.#store.refundLate(failure, request)
      if (fallbackFailure !== undefined) fallback!.refundLate(fallbackFailure, request)
    }
    return result
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

/** What one result has been through: its pending settle/refund calls, and whether it was refunded. */
interface GiveBack {
  /** Settles when the last call on the result has. */
  tail: Promise<void> | undefined
  refunded: boolean
}

const ignore = (): void => {}

const WAIT_OPTIONS = namesOf<WaitOptions>({ maxWait: true, signal: true, cost: true })

/**
 * `wait()` could not reserve a slot within `maxWait` (`ERR_RATEWINDOW_WAIT_EXCEEDED`): nothing was reserved.
 * `retryAfter` says when the call would pass if nothing else arrived; `result` is the limiter's whole answer.
 */
export class WaitExceededError extends RateLimitError {
  readonly retryAfter: number
  readonly result: RateLimitResult

  constructor(result: RateLimitResult, maxWaitMs: number) {
    super(
      'ERR_RATEWINDOW_WAIT_EXCEEDED',
      result.blocked !== undefined
        ? `\`${result.key}\` is blocked by a penalty for ${result.blocked} ms, beyond \`maxWait\` (${maxWaitMs} ms): nothing was reserved.`
        : `The earliest slot for \`${result.key}\` is ${result.retryAfter} ms away, beyond \`maxWait\` (${maxWaitMs} ms): nothing was reserved. Raise \`maxWait\`, or try again after \`error.retryAfter\` ms.`,
      { option: 'maxWait' },
    )
    this.retryAfter = result.retryAfter
    this.result = result
  }
}

function isSignal(value: unknown): value is WaitSignal {
  const signal = value as WaitSignal | null
  return (
    typeof signal === 'object' &&
    signal !== null &&
    typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function' &&
    typeof signal.removeEventListener === 'function'
  )
}

/** Why `rules` on `store` cannot reserve slots, or undefined when they can. */
function cannotReserve(store: Store, rules: readonly Rule[]): string | undefined {
  const rule = rules.find((each) => each.logic.wait === undefined || each.logic.reserve === undefined)
  if (rule !== undefined) {
    return `rule ${rule.name} is a ${rule.algorithm}, which cannot reserve a slot: its next window admits a whole burst of \`limit\` at once at the boundary, so the earliest admission of a waiting request is either that burst or a guess. Use gcra({ limit, window }) (evenly spaced, exact slots), tokenBucket or slidingWindowLog.`
  }
  if (store.reservations !== true) {
    const name = store.constructor?.name ?? 'a custom store'
    const why =
      name === 'SyncedStore'
        ? ' SyncedStore cannot: its counts reach the other processes only at its next sync, so a slot reserved here could be given there too.'
        : ''
    return `the store (${name}) cannot reserve slots (\`reservations\` is not true).${why} Use RedisStore or MemoryStore.`
  }
  return undefined
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
