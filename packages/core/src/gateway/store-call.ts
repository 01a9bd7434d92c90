/**
 * One bounded store call, the part every store call shares: a synchronous throw becomes a rejection, the wait is
 * bounded by the limiter's `timeout` (by the store itself for the calls it groups, when it has `boundsWait`, else
 * by a timer on real time), and a failure is reported to `onError` with its context, naming the limiter. Used by
 * `StoreGateway` (a limiter's decisions, refunds, charges and resets) and by `LeaseGateway` (ConcurrencyLimiter's
 * acquires and releases), so that neither carries the other's calls.
 */
import type { FailureContext } from '../observe.js'
import type { Awaitable, CallBound } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { RateLimitError } from '../support/errors.js'
import { fakeTimersHint, REAL_TIMERS } from '../time/real-timers.js'

/** The store's place behind a limiter: its main store, or the fallback that answers while the main one fails. */
export type StoreRole = 'store' | 'fallback'

export interface StoreCallOptions {
  /** The limiter's name, in `onError` contexts and observer events. */
  limiter: string
  role: StoreRole
  /** Longest wait for one call, ms. */
  timeoutMs: number
  /** Receives every failure; guarded already (it cannot throw into a request). */
  onError: (error: unknown, context: FailureContext) => void
}

/** @internal The bounded calls to one store for one limiter. */
export class StoreCall {
  readonly limiter: string
  readonly role: StoreRole
  readonly timeoutMs: number
  /** Reports a failure to `onError`, its context naming the limiter, so that a log line says which one failed. */
  readonly report: (error: unknown, context: FailureContext) => void
  readonly #store: { readonly boundsWait?: boolean }

  constructor(store: { readonly boundsWait?: boolean }, options: StoreCallOptions) {
    const { limiter, onError } = options
    this.#store = store
    this.limiter = limiter
    this.role = options.role
    this.timeoutMs = options.timeoutMs
    this.report = (error, context) => onError(error, { ...context, limiter })
  }

  /** Whether the store bounds the wait of the calls it groups itself, from the moment it sends them. */
  get storeBoundsWait(): boolean {
    return this.#store.boundsWait === true
  }

  /**
   * Runs one call: a synchronous throw becomes a rejection, and the wait is bounded: by the store itself for the
   * calls it groups (`grouped`, when the store has `boundsWait`: `run` receives the bound to pass on), else by a
   * timer here.
   */
  run<T>(
    operation: string,
    run: (within: CallBound | undefined) => Awaitable<T>,
    grouped = false,
  ): Promise<T> {
    const bounded = grouped && this.storeBoundsWait
    let pending: Awaitable<T>
    try {
      pending = run(bounded ? { timeoutMs: this.timeoutMs } : undefined)
    } catch (error) {
      return Promise.reject(error)
    }
    return isThenable(pending) && !bounded ? this.bound(pending, operation) : Promise.resolve(pending)
  }

  /**
   * Runs a call that gives something back (a refund, a release) as `run` does, grouped when the store groups:
   * resolves true when the store did it, false when it failed (reported, never thrown).
   */
  async givesBack(
    operation: 'refund' | 'release',
    key: string,
    run: (within: CallBound | undefined) => Awaitable<void>,
  ): Promise<boolean> {
    try {
      await this.run(operation, run, true)
      return true
    } catch (error) {
      this.report(error, { operation, key })
      return false
    }
  }

  /** Settles like `pending`, or rejects with `ERR_RATEWINDOW_STORE_TIMEOUT` after the limiter's `timeout`. */
  bound<T>(pending: PromiseLike<T>, operation: string): Promise<T> {
    return withTimeout(pending, this.timeoutMs, `${this.role}.${operation}`)
  }
}

/** Settles like `pending`, or rejects with ERR_RATEWINDOW_STORE_TIMEOUT after `ms`. Never leaves a rejection unhandled. */
export function withTimeout<T>(pending: PromiseLike<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // Real time even under a test's fake timers: the store answers in real time (real-timers.ts).
    const timer = REAL_TIMERS.setTimeout(() => {
      reject(
        new RateLimitError(
          'ERR_RATEWINDOW_STORE_TIMEOUT',
          `${what} took longer than ${ms} ms.${fakeTimersHint()}`,
        ),
      )
    }, ms)
    Promise.resolve(pending).then(
      (value) => {
        REAL_TIMERS.clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        REAL_TIMERS.clearTimeout(timer)
        reject(error)
      },
    )
  })
}
