/**
 * A rate limiter's path to its store: every call (consume, peek, refund, charge, reset) goes through a
 * `StoreGateway`, which owns the circuit breakers, observer reporting, and the refund of charges that arrive after
 * their decision timed out; each call is one bounded store call (store-call.ts: timeout, `onError`). A fallback
 * store is a second gateway. ConcurrencyLimiter's acquire and release go through lease-gateway.ts.
 */

import type { BreakerEvent, FailureContext, StoreCallEvent } from '../observe.js'
import { isShed, LateBound, LateReply } from '../stores/call-bound.js'
import { failureKind } from '../stores/failure-kind.js'
import { decidesInto } from '../stores/local/decide.js'
import type {
  Awaitable,
  CallReport,
  Charged,
  Decision,
  DecisionRecord,
  RefundRequest,
  Store,
  StoreRequest,
  StoreTarget,
} from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { RateLimitError } from '../support/errors.js'
import { emitWarning } from '../support/runtime.js'
import { type CircuitBreakerOptions, DomainBreakers } from './circuit-breaker.js'
import { LateCharges } from './late-charges.js'
import { StoreCall, type StoreCallOptions, type StoreRole } from './store-call.js'

/** The failure domain of every request when the store names none (one server, or a store that cannot tell). */
export const WHOLE_STORE = ''

/**
 * A decision the store did not give: it failed, timed out, or its breaker is open. The failure was reported
 * already; the limiter answers with the fallback or the failure policy.
 */
export class StoreFailure {
  constructor(
    /** The failure domain of the request (a Cluster node or slot, or `WHOLE_STORE`). */
    readonly domain: string | number,
    /** A consume that timed out and may still be applied by the store: see `StoreGateway.refundLate`. */
    readonly late?: PromiseLike<Decision>,
    /**
     * Set when the store shed the call (too many waiting for its node): not a failure, and no call was made. The
     * limiter answers as limited, with this as `retryAfter` (ms, about one round trip).
     */
    readonly shedMs?: number,
  ) {}
}

export interface StoreGatewayOptions extends StoreCallOptions {
  /** One breaker per failure domain, or none. */
  circuitBreaker: CircuitBreakerOptions | false
  /** Guarded observer callbacks, if any. */
  onStoreCall?: ((event: StoreCallEvent) => void) | undefined
  onBreaker?: ((event: BreakerEvent) => void) | undefined
}

/** Calls one store for one rate limiter. */
export class StoreGateway {
  readonly store: Store
  readonly role: StoreRole
  /** Each call's bound and `onError` reporting. */
  readonly #call: StoreCall
  readonly #breakers: DomainBreakers | undefined
  readonly #onStoreCall: ((event: StoreCallEvent) => void) | undefined
  readonly #onBreaker: ((event: BreakerEvent) => void) | undefined
  /**
   * Errors counted by the breakers already: a grouping store answers every decision of a failed call (and those
   * waiting behind it) with one error object, and a failed call counts as one failure, not one per decision.
   */
  readonly #counted = new WeakSet<object>()
  /** Errors reported to `onError` already: a failed call is reported once, not once per decision it answered. */
  readonly #reported = new WeakSet<object>()
  /** The charges of refused requests that the store may apply late (late-charges.ts). */
  readonly #late: LateCharges
  /** When the last shed warning was written (one per 10 s at most). */
  #shedWarned = Number.NEGATIVE_INFINITY

  constructor(store: Store, options: StoreGatewayOptions) {
    this.store = store
    this.role = options.role
    this.#call = new StoreCall(store, options)
    this.#breakers = options.circuitBreaker === false ? undefined : new DomainBreakers(options.circuitBreaker)
    this.#onStoreCall = options.onStoreCall
    this.#onBreaker = options.onBreaker
    this.#late = new LateCharges(store, this.#call)
  }

  /**
   * The store's decision, or a `StoreFailure` (reported already) when it failed, timed out or its breaker is open.
   * Synchronous (no promise) when the store answers synchronously, else a native `Promise`; never throws or
   * rejects for a store fault.
   */
  decide(request: StoreRequest, operation: 'consume' | 'peek'): Awaitable<Decision | StoreFailure> {
    const breakers = this.#breakers
    // While no domain has failed, the healthy path computes no domain at all.
    const known = breakers === undefined || breakers.idle ? undefined : this.domainOf(request)
    if (known !== undefined && !this.#breaker(known, (each) => each.allows(known)))
      return new StoreFailure(known)
    const started = this.#onStoreCall === undefined ? 0 : performance.now()
    const store = this.store
    if (store.boundsWait === true) {
      // A grouping store bounds the wait from the moment its call is sent: no timer here (see `boundsWait`).
      const call = this.#onStoreCall === undefined ? undefined : { waitedMs: 0, groupSize: 0 }
      const timeoutMs = this.#call.timeoutMs
      // A consume's bound is its late reply too (one object: see `LateBound`).
      const late = operation === 'consume' ? new LateBound<Decision>(timeoutMs, call) : undefined
      let sent: Promise<Decision>
      try {
        sent = Promise.resolve(store[operation](request, late ?? { timeoutMs, call }))
      } catch (error) {
        sent = Promise.reject(error)
      }
      return sent.then(
        (decision) => this.#answered(request, operation, decision, started, known, call),
        (error: unknown) => this.#failed(request, operation, error, late, started, known, call),
      )
    }
    let pending: Awaitable<Decision>
    try {
      pending = store[operation](request)
      // A synchronous store (the memory store) is answered without a promise.
      if (!isThenable(pending)) return this.#answered(request, operation, pending, started, known)
    } catch (error) {
      return this.#failed(request, operation, error, undefined, started, known)
    }
    const sent = pending
    return this.#call.bound(sent, operation).then(
      (decision) => this.#answered(request, operation, decision, started, known),
      (error: unknown) => this.#failed(request, operation, error, sent, started, known),
    )
  }

  /**
   * The local path: the decision of a store that decides in this process (`Store.decideInto`), written into `into`,
   * while nothing watches or guards the call (no `onStoreCall` observer, every breaker idle). False, with nothing
   * changed, for a call `decide` must make: another store, a store whose `consume` is not the one `decideInto`
   * mirrors (`decidesInto`), a request the store leaves to `consume`, or a store that throws (`decide` calls it
   * again and reports the failure).
   */
  decideInto(request: StoreRequest, into: DecisionRecord): boolean {
    const store = this.store
    if (this.#onStoreCall !== undefined || !decidesInto(store)) return false
    if (this.#breakers !== undefined && !this.#breakers.idle) return false
    try {
      return store.decideInto!(request, into)
    } catch {
      return false
    }
  }

  /** Milliseconds until the breaker of `domain` lets a probe through (0 when closed or without breakers). */
  retryIn(domain: string | number): number {
    return this.#breakers?.retryIn(domain) ?? 0
  }

  /**
   * Gives a charge back after its decision timed out, once the store applies it, if it does: for a request that
   * was refused after all (the failure policy's `'deny'`, or a denial by the fallback). What cannot be known is
   * reported once per fault (late-charges.ts).
   */
  refundLate(failure: StoreFailure, request: StoreRequest): void {
    if (failure.late !== undefined) this.#late.follow(failure.late, request)
  }

  /** Gives back an admitted request's cost. Resolves true when the store did; a failure is reported, never thrown. */
  refund(request: RefundRequest): Promise<boolean> {
    return this.#call.givesBack('refund', request.key, (within) => this.store.refund(request, within))
  }

  /**
   * Charges `request.cost` as far as each rule may owe (settle). Resolves the store's answer (the units charged, and
   * the outcomes after the charge where the store gives them), or undefined when the store failed or cannot charge
   * (reported, never thrown).
   */
  async charge(request: StoreRequest): Promise<Charged | undefined> {
    const store = this.store
    try {
      if (typeof store.charge !== 'function') {
        throw new RateLimitError(
          'ERR_RATEWINDOW_STORE',
          'This store cannot charge a settled cost (it has no `charge`); the difference was not charged.',
        )
      }
      const answer = await this.#call.run('charge', (within) => store.charge!(request, within), true)
      const { notices } = answer
      if (notices != null)
        for (const notice of notices) this.#call.report(notice, { operation: 'settle', key: request.key })
      return answer
    } catch (error) {
      this.#call.report(error, { operation: 'settle', key: request.key })
      return undefined
    }
  }

  /** Forgets a client's state. Rejects with the store's error, or `ERR_RATEWINDOW_STORE_TIMEOUT`. */
  reset(target: StoreTarget): Promise<void> {
    return this.#call.run('reset', () => this.store.reset(target))
  }

  /**
   * An operator's call (an override change, a manual action, an inspection): bounded as every call, and rejecting
   * with the store's error (the caller is an operator, not a request).
   */
  operate<T>(operation: string, run: (store: Store) => Awaitable<T>): Promise<T> {
    return this.#call.run(operation, () => run(this.store))
  }

  /** The failure domain of a request: the store's `failureDomainOf`, or the whole store. */
  domainOf(target: StoreTarget): string | number {
    const store = this.store
    // `scopeOf`: the contract's name before 0.2, for custom stores written against it.
    const domainOf = store.failureDomainOf ?? store.scopeOf
    if (typeof domainOf !== 'function') return WHOLE_STORE
    try {
      const domain = domainOf.call(store, target)
      return typeof domain === 'string' || typeof domain === 'number' ? domain : WHOLE_STORE
    } catch {
      return WHOLE_STORE
    }
  }

  #answered(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    decision: Decision,
    started: number,
    known: string | number | undefined,
    call?: CallReport,
  ): Decision {
    if (this.#onStoreCall !== undefined) this.#reportStoreCall(operation, started, undefined, call)
    if (known !== undefined) this.#breaker(known, (each) => each.success(known))
    // The store answers again: charges waiting to be given back go now.
    this.#late.retry()
    const { notices } = decision
    // `!= null`: a store written in JavaScript may answer `notices: null`.
    if (notices != null) {
      const context = this.#context(operation, request.key, WHOLE_STORE)
      for (const notice of notices) this.#call.report(notice, context)
    }
    return decision
  }

  /** The store threw, rejected or timed out: reported, and a breaker failure unless the error is about one key. */
  #failed(
    request: StoreRequest,
    operation: 'consume' | 'peek',
    error: unknown,
    pending: PromiseLike<Decision> | undefined,
    started: number,
    known: string | number | undefined,
    call?: CallReport,
  ): StoreFailure {
    const domain = known ?? this.domainOf(request)
    if (isShed(error)) return this.#shed(domain, error.retryAfterMs)
    if (this.#onStoreCall !== undefined) this.#reportStoreCall(operation, started, error, call)
    if (this.#breakers !== undefined) {
      // A key's own error proves the server answered: the domain is healthy.
      if (failureKind(error) === 'key') this.#breaker(domain, (each) => each.success(domain))
      else if (this.#firstTime(error)) this.#breaker(domain, (each) => each.failure(domain))
    }
    if (firstTime(this.#reported, error))
      this.#call.report(error, this.#context(operation, request.key, domain))
    // A consume the store may still apply: a grouping store's late reply, or a call that timed out here.
    const late =
      operation !== 'consume'
        ? undefined
        : pending instanceof LateReply || isTimeout(error)
          ? pending
          : undefined
    return new StoreFailure(domain, late)
  }

  /** Whether a breaker has not counted this error yet (an error object shared by a failed group counts once). */
  #firstTime(error: unknown): boolean {
    return firstTime(this.#counted, error)
  }

  /** A shed decision: no call was made and nothing failed; one process warning per 10 s says it happens. */
  #shed(domain: string | number, retryAfterMs: number): StoreFailure {
    const now = performance.now()
    if (now - this.#shedWarned >= 10_000) {
      this.#shedWarned = now
      try {
        emitWarning(
          `Decisions of limiter ${this.#call.limiter} are being shed (answered as limited): more were waiting for one Redis node than its \`maxWaiting\`.`,
          'RATEWINDOW_SHED',
        )
      } catch {
        // a warning listener that throws: nothing more can be done without risking the request
      }
    }
    return new StoreFailure(domain, undefined, Math.max(1, retryAfterMs))
  }

  /** `onError`'s context for a decision: a fallback's failures are `'fallback'`, without a domain. */
  #context(operation: 'consume' | 'peek', key: string, domain: string | number): FailureContext {
    if (this.role === 'fallback') return { operation: 'fallback', key }
    return domain === WHOLE_STORE ? { operation, key } : { operation, key, domain, scope: domain }
  }

  #reportStoreCall(operation: 'consume' | 'peek', started: number, error?: unknown, call?: CallReport): void {
    const event: StoreCallEvent = {
      limiter: this.#call.limiter,
      store: this.role,
      operation,
      durationMs: performance.now() - started,
    }
    if (call !== undefined) {
      // A grouped decision: the call's own time, and apart from it the wait for the group. Never sent: all waiting.
      const waitedMs = call.groupSize === 0 ? event.durationMs : call.waitedMs
      event.durationMs -= waitedMs
      event.waitedMs = waitedMs
      event.groupSize = call.groupSize
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

  /** Runs a change of a domain's breaker, reporting a change of its state to `onBreaker`. */
  #breaker<T>(domain: string | number, change: (breakers: DomainBreakers) => T): T {
    const breakers = this.#breakers!
    if (this.#onBreaker === undefined) return change(breakers)
    const from = breakers.state(domain)
    const value = change(breakers)
    const to = breakers.state(domain)
    if (from !== to)
      this.#onBreaker({ limiter: this.#call.limiter, store: this.role, domain, scope: domain, from, to })
    return value
  }
}

/** Whether `error` is not in `seen` yet, adding it: one failed call answers many decisions with one error object. */
function firstTime(seen: WeakSet<object>, error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return true
  if (seen.has(error)) return false
  seen.add(error)
  return true
}

function isTimeout(error: unknown): boolean {
  return error instanceof RateLimitError && error.code === 'ERR_RATEWINDOW_STORE_TIMEOUT'
}
