/**
 * A limiter's answer from its stores: the store's decision, or the fallback's when the store failed or its breaker
 * is open, or the failure policy's; never a rejection for a store failure.
 */
import { StoreFailure, StoreGateway } from '../gateway/store-gateway.js'
import { policyResult, type RateLimitResult, type Settler, shedResult, toResult } from '../result.js'
import type { Awaitable, Decision, StoreRequest } from '../stores/types.js'
import { guardedObserver, guardedReporter } from '../support/report.js'
import type { LimiterConfig } from './options.js'

export interface AnswerPolicy {
  /** `onStoreError: 'allow'`: a failure without a fallback's answer lets the request through. */
  allowOnError: boolean
  /** `onShed: 'fallback'`: a shed decision gets the answer a failure gets, instead of a limited one. */
  shedToFallback: boolean
}

/** The store's answer, or the fallback's, or the failure policy's, for one limiter. */
export class StoreAnswers {
  /** Every call to the store goes through here. */
  readonly store: StoreGateway
  /** The fallback store has a gateway of its own. */
  readonly fallback: StoreGateway | undefined
  readonly #policy: AnswerPolicy
  /** The limiter, which settles the results it answers (`RateLimitResult.settle`). */
  readonly #settler: Settler

  constructor(
    store: StoreGateway,
    fallback: StoreGateway | undefined,
    policy: AnswerPolicy,
    settler: Settler,
  ) {
    this.store = store
    this.fallback = fallback
    this.#policy = policy
    this.#settler = settler
  }

  /**
   * The store's answer, or the fallback's, or the failure policy's (`allowOnError`: the limiter's, unless a call
   * such as `wait()` brings its own). Synchronous (no promise) when the store answers synchronously and well.
   */
  decide(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    allowOnError = this.#policy.allowOnError,
  ): Awaitable<RateLimitResult> {
    const decided = this.store.decide(request, operation)
    // The gateway answers a Decision, a StoreFailure, or (for an asynchronous store) a native promise of either.
    if (decided instanceof Promise)
      return decided.then((each) => this.#fromStore(request, operation, each, allowOnError))
    return this.#fromStore(request, operation, decided as Decision | StoreFailure, allowOnError)
  }

  #fromStore(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    decided: Decision | StoreFailure,
    allowOnError: boolean,
  ): Awaitable<RateLimitResult> {
    if (decided instanceof StoreFailure) return this.#withoutStore(request, operation, decided, allowOnError)
    return toResult(request, decided, 'store', this.#settlerOf(operation))
  }

  /** A consume's result is settleable; a peek's charged nothing, and settles nothing. */
  #settlerOf(operation: 'consume' | 'peek'): Settler | undefined {
    return operation === 'consume' ? this.#settler : undefined
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
    allowOnError: boolean,
  ): Promise<RateLimitResult> {
    // Shed by the store (too many waiting for it): not a failure; nothing was sent, nothing to refund. Limited,
    // unless `onShed: 'fallback'` asks for the answer a failure gets.
    if (failure.shedMs !== undefined && !this.#policy.shedToFallback)
      return shedResult(request, failure.shedMs)
    let result: RateLimitResult | undefined
    let fallbackFailure: StoreFailure | undefined
    const fallback = this.fallback
    if (fallback !== undefined) {
      const decided = await fallback.decide(request, operation)
      if (decided instanceof StoreFailure) fallbackFailure = decided
      else result = toResult(request, decided, 'fallback', this.#settlerOf(operation))
    }
    result ??= policyResult(request, allowOnError, Math.max(1_000, this.store.retryIn(failure.domain)))
    if (!result.allowed) {
      this.store.refundLate(failure, request)
      if (fallbackFailure !== undefined) fallback!.refundLate(fallbackFailure, request)
    }
    return result
  }
}

/**
 * A limiter's answers: a gateway to its store and one to its fallback, with its bound, breakers and observers; the
 * results settled through `settler`.
 */
export function storeAnswers(config: LimiterConfig, settler: Settler): StoreAnswers {
  const gateway = {
    limiter: config.name,
    timeoutMs: config.timeoutMs,
    onError: guardedReporter(config.onError),
    circuitBreaker: config.circuitBreaker,
    onStoreCall: guardedObserver(config.observer?.onStoreCall, 'onStoreCall'),
    onBreaker: guardedObserver(config.observer?.onBreaker, 'onBreaker'),
  }
  const store = new StoreGateway(config.store, { ...gateway, role: 'store' })
  const fallback =
    config.fallback === undefined
      ? undefined
      : new StoreGateway(config.fallback, { ...gateway, role: 'fallback' })
  return new StoreAnswers(store, fallback, config, settler)
}
