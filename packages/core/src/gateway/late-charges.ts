/**
 * The charges of requests the failure policy refused while the store may still apply them: a consume
 * that timed out is given back once its late reply shows it charged; a give-back that never reached the store (it
 * waited behind a failed call, or was shed) is tried again, for a while; what cannot be known is counted and reported
 * to `onError` once per fault, with the count: a call whose connection closed while the store had it (the store may
 * or may not have applied it), a give-back that failed once sent, and give-backs past the retry bounds.
 */
import { isShed, LateBound } from '../stores/call-bound.js'
import { mayHaveRun } from '../stores/failure-kind.js'
import type { CallReport, Decision, RefundRequest, Store, StoreRequest } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { RateLimitError } from '../support/errors.js'
import { REAL_TIMERS } from '../time/real-timers.js'
import type { Timers } from '../time/timers.js'
import type { StoreCall } from './store-call.js'

/** The first wait before give-backs that were never sent are tried again; it doubles up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 2_000
/**
 * How long a fault must stay quiet (nothing followed, nothing to try again) before its cost is reported: the calls of
 * one fault settle in bursts (each timeout of a stalled server, each reconnect), and the report counts them all.
 */
const REPORT_QUIET_MS = 1_000
/** How long a give-back is tried again, at most, and how many wait at once: past either, it is counted in doubt. */
export const RETRY_FOR_MS = 60_000
export const MAX_RETRIES = 10_000

/** What one fault cost, since it began: units given back, units that may stay charged. */
interface Tally {
  givenBack: number
  inDoubt: number
  /** A key of the fault, for `onError`'s context. */
  key: string | undefined
}

/** @internal The late charges of one limiter's store (one gateway). */
export class LateCharges {
  readonly #store: Store
  readonly #call: StoreCall
  readonly #timers: Pick<Timers, 'now' | 'setTimeout' | 'clearTimeout'>
  /**
   * Give-backs in flight. While any is, or any waits to be tried again, the fault lasts. (Late replies followed are
   * not counted: none comes for a call the store never sent, nor while a client without a timeout still waits.)
   */
  #open = 0
  #tally: Tally = { givenBack: 0, inDoubt: 0, key: undefined }
  /** Give-backs never sent, oldest first, each with the time past which it is no longer tried. */
  #retries: { refund: RefundRequest; until: number }[] = []
  #retryTimer: unknown
  #retryDelay = RETRY_FIRST_MS
  #reportTimer: unknown

  constructor(
    store: Store,
    call: StoreCall,
    timers: Pick<Timers, 'now' | 'setTimeout' | 'clearTimeout'> = REAL_TIMERS,
  ) {
    this.#store = store
    this.#call = call
    this.#timers = timers
  }

  /** Follows a consume that timed out (`late`) for a refused request: its charge goes back if it comes. */
  follow(late: PromiseLike<Decision>, request: StoreRequest): void {
    if (request.cost === 0) return
    late.then(
      (decision) => {
        if (decision?.allowed === true)
          this.#giveBack({ ...request, at: decision.now + (decision.wait ?? 0) })
      },
      (error: unknown) => {
        // The call failed once sent, after its decision was answered: the store may have applied it.
        if (mayHaveRun(error)) this.#doubt(request.cost, request.key)
      },
    )
  }

  /**
   * Sends the give-backs that wait to be tried again: when the store has just answered a decision (it is back), or
   * when their wait is over (it doubles while they keep coming back). Those past their time are counted in doubt.
   * Cheap when none waits: the gateway calls it on every answer.
   */
  retry(): void {
    if (this.#retries.length === 0) return
    if (this.#retryTimer !== undefined) this.#timers.clearTimeout(this.#retryTimer)
    this.#retryTimer = undefined
    const now = this.#timers.now()
    const due = this.#retries
    this.#retries = []
    for (const { refund, until } of due) {
      if (now > until) this.#doubt(refund.cost, refund.key)
      else this.#giveBack(refund)
    }
  }

  /**
   * Gives a charge back: done when the store answers, or answers late; tried again when it was never sent, or the
   * server refused it without running it; in doubt when it failed once sent, or its late outcome is such a failure.
   */
  #giveBack(refund: RefundRequest): void {
    this.#open++
    const store = this.#store
    const grouped = store.boundsWait === true
    // A grouping store fills in the call report when it sends the call: groupSize 0 means it never did.
    const call: CallReport | undefined = grouped ? { waitedMs: 0, groupSize: 0 } : undefined
    const late = grouped ? new LateBound<Decision>(this.#call.timeoutMs, call) : undefined
    let pending: PromiseLike<void> | undefined
    let sent: Promise<void>
    try {
      const returned = store.refund(refund, late)
      pending = isThenable(returned) ? returned : undefined
      sent =
        pending === undefined || grouped ? Promise.resolve(returned) : this.#call.bound(pending, 'refund')
    } catch (error) {
      sent = Promise.reject(error)
    }
    const failed = (error: unknown) => {
      if (mayHaveRun(error)) this.#doubt(refund.cost, refund.key)
      else this.#retryLater(refund) // the server answered with an error (loading, a failover): it did not run
    }
    sent.then(
      () => {
        this.#retryDelay = RETRY_FIRST_MS
        this.#gaveBack(refund.cost)
        this.#open--
      },
      (error: unknown) => {
        const later = late ?? pending
        if (isShed(error) || call?.groupSize === 0) this.#retryLater(refund)
        // Sent and not answered in time: given back if its reply comes.
        else if (isTimeout(error) && later !== undefined)
          later.then(() => this.#gaveBack(refund.cost), failed)
        else failed(error)
        this.#open--
      },
    )
  }

  #retryLater(refund: RefundRequest): void {
    if (this.#retries.length >= MAX_RETRIES) {
      this.#doubt(refund.cost, refund.key)
      return
    }
    this.#retries.push({ refund, until: this.#timers.now() + RETRY_FOR_MS })
    if (this.#retryTimer !== undefined) return
    const delay = this.#retryDelay
    this.#retryDelay = Math.min(delay * 2, RETRY_MAX_MS)
    this.#retryTimer = this.#timers.setTimeout(() => this.retry(), delay)
  }

  #gaveBack(units: number): void {
    this.#tally.givenBack += units
    this.#reportLater()
  }

  #doubt(units: number, key: string): void {
    this.#tally.inDoubt += units
    this.#tally.key ??= key
    this.#reportLater()
  }

  /**
   * Reports the fault's cost once it has been quiet for REPORT_QUIET_MS (nothing given back or counted in doubt,
   * no give-back in flight or waiting to be tried again): once per fault, with the counts; nothing when every
   * charge was given back.
   */
  #reportLater(): void {
    if (this.#reportTimer !== undefined) this.#timers.clearTimeout(this.#reportTimer)
    this.#reportTimer = this.#timers.setTimeout(() => {
      this.#reportTimer = undefined
      if (this.#open > 0 || this.#retries.length > 0) this.#reportLater()
      else this.#report()
    }, REPORT_QUIET_MS)
  }

  #report(): void {
    const { givenBack, inDoubt, key } = this.#tally
    this.#tally = { givenBack: 0, inDoubt: 0, key: undefined }
    if (inDoubt === 0) return
    this.#call.report(
      Object.assign(
        new RateLimitError(
          'ERR_RATEWINDOW_STORE',
          `After a store failure, ${inDoubt} unit${inDoubt === 1 ? '' : 's'} of requests refused by the failure policy may stay charged: the store may have applied them, but their replies were lost (a connection closed with the calls in flight, or a client timed them out) or their refunds could not be confirmed. ${givenBack} unit${givenBack === 1 ? '' : 's'} the store applied late ${givenBack === 1 ? 'was' : 'were'} given back.`,
        ),
        { inDoubt, givenBack },
      ),
      { operation: 'refund', key: key! },
    )
  }
}

function isTimeout(error: unknown): boolean {
  return error instanceof RateLimitError && error.code === 'ERR_RATEWINDOW_STORE_TIMEOUT'
}
