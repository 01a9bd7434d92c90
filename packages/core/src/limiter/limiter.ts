import type { Penalty } from '../algorithms/penalty.js'
import { type PlanSet, type PlanTerms, planNamed, RecordedPlans } from '../algorithms/plans.js'
import type { Rule } from '../algorithms/types.js'
import { resetTarget, storeRequest } from '../gateway/store-request.js'
import { type DecisionEvent, outcomeEvent } from '../observe.js'
import type { Usage } from '../operator/inspection.js'
import { LimiterOperator } from '../operator/operator.js'
import type { RateLimitResult, SettleResult } from '../result.js'
import type { Awaitable, Store, StoreRequest } from '../stores/types.js'
import { RateLimitError } from '../support/errors.js'
import { guardedObserver } from '../support/report.js'
import { keyArgument, wellFormedKey, wholeNumber } from '../support/validators.js'
import type { WaitSignal } from '../time/wait-queue.js'
import { BlockedCache } from './blocked-cache.js'
import { GiveBackLedger } from './give-back.js'
import { type LocalPath, localPath } from './local-path.js'
import { claimNamespace, type Identity, type NamespaceClaim, warnSuperseded } from './namespaces.js'
import { nearLimitObserver } from './near-limit.js'
import { type RateLimiterOptions, resolveLimiterOptions } from './options.js'
import { ShadowRules } from './shadow.js'
import { type StoreAnswers, storeAnswers } from './store-answers.js'
import { SlotWaits, schedule, type WaitOptions, waitFor } from './wait.js'

export interface LimitOptions {
  /** Whole units this request costs; 0 checks without consuming. @default 1 */
  cost?: number
  /** The route, for observer events only (adapters pass the framework's route pattern). */
  route?: string
  /**
   * With `plans`: the request's plan, one of their names (the limiter's `defaultPlan` answers for any other;
   * without one, an unknown plan rejects with `ERR_RATEWINDOW_UNKNOWN_PLAN`). For `peek`, absent reads the plan the
   * store recorded for the key.
   */
  plan?: string
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
  /** The rules by mode: enforcing, in shadow mode beside them, or all in shadow mode (shadow.ts). */
  readonly #modes: ShadowRules
  readonly #onDecision: ((event: DecisionEvent) => void) | undefined
  /** @internal The parsed `penalty`, if any. */
  readonly penalty: Penalty | undefined
  /** @internal The parsed `plans`, if any (docs/plans-and-quotas.md). */
  readonly planSet: PlanSet | undefined
  /** The store's answer, or the fallback's, or the failure policy's (store-answers.ts). */
  readonly #answers: StoreAnswers
  readonly #blocked: BlockedCache | undefined
  readonly #claim: NamespaceClaim
  /** The superseded warning's advice (`Identity.sharing`). */
  readonly #sharing: string | undefined
  /** Refunds and settlements of this limiter's results, once per result (give-back.ts). */
  readonly #ledger: GiveBackLedger
  /** A store deciding in this process, with nothing to read beside the rules: the local path (local-path.ts). */
  readonly #local: LocalPath | undefined
  /** @internal The requests of `wait()` (and the HTTP `delay`) waiting for their slots: one timer for all. */
  readonly waiting: SlotWaits
  /** Operating one key's limits live: overrides, blocks, `give`, `take`, `inspect`, `top` (docs/operating-limits.md). */
  readonly operator: LimiterOperator
  /**
   * @param identity For the HTTP engine only: how it qualifies the limiter (a Fastify route, a `limit` function).
   */
  constructor(options: RateLimiterOptions, identity: Identity = {}) {
    const config = resolveLimiterOptions(options, identity)
    this.rules = config.rules
    this.store = config.store
    this.prefix = config.prefix
    this.group = config.group
    this.namespace = config.namespace
    // With plans, the largest any plan accepts (a request's own plan is checked when it is known: `#request`).
    this.maxCost = config.plans?.maxCost ?? Math.min(...this.rules.map((rule) => rule.maxCost))
    this.name = config.name
    this.shadow = config.shadow
    this.#modes = new ShadowRules(this.rules, config.shadow)
    this.#onDecision = nearLimitObserver(
      guardedObserver(config.observer?.onDecision, 'onDecision'),
      config.nearLimit,
      config.rules,
    )
    this.penalty = config.penalty
    this.planSet = config.plans
    this.#answers = storeAnswers(config, this)
    const { store, fallback } = this.#answers
    this.#blocked = config.blockedCache === false ? undefined : new BlockedCache(config.blockedCache)
    this.#sharing = identity.sharing
    this.#claim = claimNamespace(
      this.store,
      this.namespace,
      this.rules,
      this.group,
      identity.owner ?? this,
      identity.dynamicLimit,
    )
    const modes = this.#modes
    const reserving = modes.allShadow ? this.rules : modes.enforcing
    // With overrides, a waiting call reads its key's block when its slot comes (wait.ts).
    const peek = config.overrides === undefined ? undefined : (key: string) => this.peek(key, { cost: 0 })
    this.waiting = new SlotWaits(this.store, reserving, (result) => this.refund(result), config, peek)
    this.operator = new LimiterOperator(this, store, config.overrides, {
      forget: (key) => this.#blocked?.delete(wellFormedKey(key)),
      reset: (key) => this.reset(key),
      onOverride: guardedObserver(config.observer?.onOverride, 'onOverride'),
    })
    this.#local = localPath(this, config, modes, this.#answers.store, this.#blocked)
    this.#ledger = new GiveBackLedger({
      store,
      fallback,
      rules: modes,
      blocked: this.#blocked,
      request: (key, cost, plan) => this.#request(key, cost, plan),
      maxDebt: config.maxDebt,
    })
  }

  /** The names of its plans (option `plans`), the first one's rules being `rules`; undefined without plans. */
  get plans(): readonly string[] | undefined {
    return this.planSet?.names
  }

  /** @deprecated `limiter.operator`: the same handle, under the name of what it does; this name stays until 1.0. */
  get overrides(): LimiterOperator {
    return this.operator
  }

  /**
   * @internal Throws, naming `option`, when this limiter cannot reserve slots: a rule whose algorithm cannot (the
   * fixed window, the sliding window counter) or a store that does not (SyncedStore).
   */
  checkReservations(option: string): void {
    this.waiting.check(option)
  }

  /**
   * Waits until a call for `key` may go, its slot reserved in the store in the same atomic step that decided it
   * (exact across processes sharing one Redis, first come, first served within a process), and resolves with the
   * result (`result.delay`: how long it waited). Rejects at once with `ERR_RATEWINDOW_WAIT_EXCEEDED` when the
   * earliest admission is beyond `maxWait` (nothing reserved; `error.retryAfter` says when it would pass). On
   * abort, rejects with the signal's reason and gives the slot back. When the store fails and no `fallback`
   * answers, rejects with `ERR_RATEWINDOW_STORE`, unless `onStoreError: 'allow'` is set (on the limiter, or in
   * `options`): then it resolves at once. A shadow limiter
   * never waits (the result says `delay` and `shadow`). Needs GCRA, token bucket or sliding window log rules on a
   * MemoryStore or RedisStore (docs/waiting.md).
   * @example
   * const api = new RateLimiter({ rules: gcra({ limit: 5000, window: '1h' }), store: new RedisStore({ client }) })
   * await api.wait('github') // then call the API
   */
  wait(key: string, options?: WaitOptions): Promise<RateLimitResult> {
    return waitFor(this, key, options)
  }

  /**
   * @internal Waits for the reserved slot of `result` (one with `delay`), under the one timer; on abort, gives the
   * slot back and rejects with the signal's reason.
   */
  waitForSlot(result: RateLimitResult, signal?: WaitSignal): Promise<void> {
    return this.waiting.forSlot(result, signal)
  }

  /**
   * Runs \`fn\` once \`wait(key, options)\` resolves, and answers what it returns: a call to a rate-limited API
   * that stays under its limit across every process sharing the store. Rejects as \`wait\` does, without calling
   * \`fn\`; a rejection of \`fn\` passes through (its slot stays spent).
   * @example await api.schedule('github', () => fetch('https://api.github.com/repos/octocat/hello-world'))
   */
  schedule<T>(key: string, fn: () => T | PromiseLike<T>, options?: WaitOptions): Promise<T> {
    return schedule(this, key, fn, options)
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
  limitNow(
    key: string,
    options?: LimitOptions,
    reserve?: number,
    onStoreError?: 'allow' | 'deny', // a wait()'s, when not the limiter's
  ): Awaitable<RateLimitResult> {
    if (this.#claim.superseded) warnSuperseded(this.#claim, this.name, this.namespace, this.#sharing)
    // A plan named to a limiter without plans goes to `#request`, which refuses it.
    const local =
      reserve === undefined && options?.plan === undefined
        ? this.#local?.limit(key, options?.cost ?? 1)
        : undefined
    if (local !== undefined) return this.#reported(this.#modes.letThrough(local, true), options?.route)
    const request = this.#request(key, options?.cost, options?.plan, true)
    const route = options?.route
    let cached = this.#blocked?.get(request.key, request.cost)
    // A denial cached under another plan (the key's plan changed since) is asked again.
    if (cached !== undefined && cached.plan !== planName(request)) cached = undefined
    // A reservation asks the store unless the cached denial lasts longer than it may wait (a slot is never
    // earlier than the denial's retryAfter), or the key is blocked by a penalty.
    if (
      cached !== undefined &&
      (reserve === undefined || cached.retryAfter > reserve || cached.blocked !== undefined)
    )
      return this.#finishLimit(request, cached, route)
    // A reservation (`reserve`: the longest wait, ms, within the horizon) goes to the enforcing rules only.
    if (reserve !== undefined) reserve = Math.min(reserve, this.waiting.horizonMs)
    const sent = this.#modes.mixed ? { ...request, rules: this.#modes.enforcing } : request
    // A wait()'s own failure policy, or (undefined) the limiter's.
    const allowOnError = onStoreError === undefined ? undefined : onStoreError === 'allow'
    const sentAt = reserve === undefined ? 0 : this.waiting.sending()
    const decided = this.#answers.decide(
      reserve === undefined ? sent : { ...sent, reserve },
      'consume',
      allowOnError,
    )
    const result =
      decided instanceof Promise
        ? decided.then((each) => this.#afterStore(request, each, route))
        : this.#afterStore(request, decided, route)
    return reserve === undefined ? result : this.waiting.sent(result, sentAt)
  }

  #afterStore(
    request: StoreRequest,
    result: RateLimitResult,
    route: string | undefined,
  ): Awaitable<RateLimitResult> {
    if (!result.allowed && result.source === 'store') this.#blocked?.set(request.key, result)
    return this.#finishLimit(request, result, route)
  }

  /** Shadow rules and observers, after the enforcing decision. */
  #finishLimit(
    request: StoreRequest,
    result: RateLimitResult,
    route: string | undefined,
  ): Awaitable<RateLimitResult> {
    if (this.#modes.mixed) {
      return this.#modes
        .add(request, result, (shadow) => this.#answers.decide(shadow, 'consume'))
        .then((withShadow) => this.#reported(withShadow, route))
    }
    return this.#reported(this.#modes.letThrough(result, true), route)
  }

  #reported(result: RateLimitResult, route: string | undefined): RateLimitResult {
    if (this.#onDecision !== undefined) this.#onDecision(outcomeEvent(this.name, result, route))
    return result
  }

  /** The result `limit` would give now, without consuming anything. */
  async peek(key: string, options?: LimitOptions): Promise<RateLimitResult> {
    const request = this.#request(key, options?.cost, options?.plan)
    const modes = this.#modes
    if (!modes.mixed) return modes.letThrough(await this.#answers.decide(request, 'peek'), false)
    const enforced = await this.#answers.decide({ ...request, rules: modes.enforcing }, 'peek')
    return modes.add(request, enforced, (shadow) => this.#answers.decide(shadow, 'peek'))
  }

  /**
   * Where `key` stands against each rule, for a billing page: used, limit, remaining, when the limit is whole again and,
   * for a `quota` rule, when its period ends (docs/plans-and-quotas.md). One store call (a peek), charging nothing;
   * rejects with the store's error (`limiter.operator.inspect` tells the operator's side: overrides and blocks).
   */
  usage(key: string): Promise<Usage> {
    return this.operator.usage(key)
  }

  /**
   * Gives back an admitted request, e.g. one whose response should not count. Pass its result. Waits at most
   * `timeout`; a failure is reported to `onError`, never thrown. A result is given back at most once in this
   * process: a second `refund`, or a `settle` after it, gives back nothing; after a `settle`, the refund gives
   * back what the settle left charged (`result.cost`). Calls on one result run one after the other, in call order.
   */
  refund(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'allowed' | 'source' | 'shadow' | 'plan'>,
  ): Promise<void> {
    return this.#ledger.refund(result)
  }

  /**
   * Reserve-then-settle: the request was admitted with an estimated `cost`; now its actual cost is known (e.g.
   * LLM tokens used). A smaller actual cost gives the difference back (the refund rules of each algorithm); a
   * larger one charges the difference at once, atomically and in full: a rule taken past its limit owes the excess
   * until it has passed at its rate, up to `maxDebt` (what that bound leaves out is reported as `uncharged`).
   * `result.cost` becomes what is charged now, so that a later
   * `refund(result)` gives back the right amount, and `result.remaining` (and each rule's) follows what was
   * given back or charged; after a charge, `result.reset` and each rule's `reset` and `next` are the store's waits
   * after it (from the decision's `at`), so that the reset headers announce when the next request passes.
   * Calls on one result (`settle`, `refund`) run one after the other, in call order, and
   * each sees what the previous left: a second `settle` with the same actual cost does nothing, and a `settle` after a `refund` settles nothing. Waits at most `timeout`; a store failure is
   * reported to `onError` and nothing is charged (when giving back, the units count as given back: the store
   * may apply a call that timed out). Throws only for a bad `actualCost`. In one process only: a result handed
   * to another process is settled there without knowing what happened here.
   */
  async settle(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'allowed' | 'source' | 'shadow' | 'plan'> &
      Partial<Pick<RateLimitResult, 'remaining' | 'rules' | 'limit' | 'reset' | 'rule'>>,
    actualCost: number,
  ): Promise<SettleResult> {
    wholeNumber(actualCost, 'actualCost', { min: 0, code: 'ERR_RATEWINDOW_INVALID_COST' })
    return this.#ledger.settle(result, actualCost)
  }

  /**
   * Forgets `key`'s counters and penalty (in the fallback store too), never its override or manual block. Rejects
   * with the store's error, or with `ERR_RATEWINDOW_STORE_TIMEOUT` when a store takes longer than `timeout`.
   */
  async reset(key: string): Promise<void> {
    keyArgument(key)
    key = wellFormedKey(key)
    this.#blocked?.delete(key)
    const target = (rules: readonly Rule[]) => resetTarget(this, this.operator.scope, key, rules)
    const { store, fallback } = this.#answers
    const resets = [store, fallback].flatMap((gateway) =>
      gateway === undefined ? [] : this.#modes.ruleSets().map((rules) => gateway.reset(target(rules))),
    )
    await Promise.all(resets)
    this.#blocked?.delete(key)
  }

  /**
   * The store request of `key` for `cost`: with plans, for `plan` (`decides`: a decision's, which needs one, the
   * default plan answering for an unknown one), else for the key's recorded plan.
   */
  #request(key: string, cost: number | undefined = 1, plan?: string, decides = false): StoreRequest {
    const request = storeRequest(this, this.operator.scope, key, cost)
    if (this.planSet !== undefined) {
      if (plan !== undefined || decides) {
        const terms = planNamed(this.planSet, plan)
        if (decides && request.cost > terms.maxCost) throw costAbovePlan(request.cost, terms)
        request.plan = terms
      }
    } else if (plan !== undefined) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_UNKNOWN_PLAN',
        `\`plan\` ${JSON.stringify(plan)} was given to a limiter without \`plans\`: give the limiter its \`plans\` (docs/plans-and-quotas.md).`,
        { option: 'plan' },
      )
    }
    return request
  }
}

/** The error for a decision whose cost its plan's rules never admit. */
function costAbovePlan(cost: number, plan: PlanTerms): RateLimitError {
  return new RateLimitError(
    'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
    `\`cost\` ${cost} exceeds the largest cost the plan ${JSON.stringify(plan.name)} accepts (${plan.maxCost}: its smallest limit): such a request could never pass under it. Lower the cost, or refuse it before asking the limiter.`,
    { option: 'cost' },
  )
}

/** The name of the plan a request was made for; undefined without one. */
function planName(request: StoreRequest): string | undefined {
  const { plan } = request
  return plan === undefined || plan instanceof RecordedPlans ? undefined : plan.name
}
