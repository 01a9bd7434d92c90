/**
 * ConcurrencyLimiter's path to its store: its two calls, acquire and release, each one bounded store call
 * (store-call.ts) with `onError` reporting. No circuit breaker and no decisions: those are `StoreGateway`'s.
 */
import { LateReply } from '../stores/call-bound.js'
import type { ConcurrencyStore, LeaseDecision, LeaseRequest } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { StoreCall, type StoreCallOptions } from './store-call.js'

/** @internal Calls one `ConcurrencyStore` for one concurrency limiter. */
export class LeaseGateway {
  readonly store: ConcurrencyStore
  readonly #call: StoreCall

  constructor(store: ConcurrencyStore, options: StoreCallOptions) {
    this.store = store
    this.#call = new StoreCall(store, options)
  }

  /**
   * Takes a lease, or resolves undefined when the store failed (reported). A call that timed out may still be
   * applied by the store later (a Cluster client retrying it on the promoted replica), after the release sent for
   * it: `onLate` receives that late lease, so that the limiter releases it again.
   */
  async acquire(
    request: LeaseRequest,
    onLate: (decision: LeaseDecision) => void,
  ): Promise<LeaseDecision | undefined> {
    const late = new LateReply<LeaseDecision>()
    let sent: PromiseLike<LeaseDecision> = late
    try {
      return await this.#call.run(
        'acquire',
        (within) => {
          const pending = this.store.acquire(request, within && { ...within, late })
          if (isThenable(pending) && within === undefined) sent = pending
          return pending
        },
        true,
      )
    } catch (error) {
      this.#call.report(error, { operation: 'acquire', key: request.key })
      // A late rejection was reported already, as the timeout.
      sent.then(onLate, () => {})
      return undefined
    }
  }

  /** Gives a lease back. Resolves true when the store did; a failure is reported, never thrown. */
  release(request: Omit<LeaseRequest, 'limit'>): Promise<boolean> {
    return this.#call.givesBack('release', request.key, (within) => this.store.release(request, within))
  }
}
