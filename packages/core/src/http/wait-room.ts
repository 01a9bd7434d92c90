/**
 * The wait room of option `delay`: the places of requests waiting for a reserved slot, bounded in all
 * (`maxWaiting`) and per key (`maxPerKey`), and the wait itself, given up when the client leaves. `slowDown()`
 * bounds its delayed requests with the same places (`WaitingPlaces`).
 */
import type { RateLimiter } from '../limiter/limiter.js'
import { WaitExceededError } from '../limiter/wait.js'
import type { RateLimitResult } from '../result.js'
import type { FrameworkBinding } from './binding.js'

/** How many requests may wait at once in one middleware of this process: in all, and per key. */
export interface WaitingBounds {
  /** Requests waiting at once; `Infinity` for no bound. */
  maxWaiting: number
  /** Requests of one key waiting at once; `Infinity` for no bound. */
  maxPerKey: number
}

/** The places of one middleware's waiting requests: taken and given back one by one, never past the bounds. */
export class WaitingPlaces {
  readonly #maxWaiting: number
  readonly #maxPerKey: number
  #waiting = 0
  readonly #waitingPerKey = new Map<string, number>()

  constructor(bounds: WaitingBounds) {
    this.#maxWaiting = bounds.maxWaiting
    this.#maxPerKey = bounds.maxPerKey
  }

  /** Requests waiting now. */
  get size(): number {
    return this.#waiting
  }

  /**
   * Takes a place for a request of `key`; false when a bound is reached. Taken in the same synchronous step as
   * the check, so that concurrent requests cannot all pass the bounds; `leave` gives it up.
   */
  enter(key: string): boolean {
    const ofKey = this.#waitingPerKey.get(key) ?? 0
    if (this.#waiting >= this.#maxWaiting || ofKey >= this.#maxPerKey) return false
    this.#waiting++
    this.#waitingPerKey.set(key, ofKey + 1)
    return true
  }

  leave(key: string): void {
    this.#waiting--
    const ofKey = this.#waitingPerKey.get(key)! - 1
    if (ofKey === 0) this.#waitingPerKey.delete(key)
    else this.#waitingPerKey.set(key, ofKey)
  }
}

/**
 * The places of one middleware's requests waiting for a reserved slot (taken before the store call, so that
 * concurrent decisions cannot all pass the bounds), and their waits.
 */
export class WaitRoom<Req> extends WaitingPlaces {
  readonly #binding: FrameworkBinding<Req>

  constructor(bounds: WaitingBounds, binding: FrameworkBinding<Req>) {
    super(bounds)
    this.#binding = binding
  }

  /**
   * Waits under the limiter's one timer until the reserved slot of `result` comes: true then, false when the
   * client of `request` disconnected first (the binding's `onClose`; its slot is given back), or the refusal when an
   * operator blocked the key meanwhile (its slot is given back).
   */
  async wait(
    limiter: RateLimiter,
    result: RateLimitResult,
    request: Req,
  ): Promise<boolean | RateLimitResult> {
    const gone = new AbortController()
    const stop = this.#binding.onClose?.(request, () => gone.abort())
    try {
      await limiter.waitForSlot(result, gone.signal)
      return true
    } catch (error) {
      return error instanceof WaitExceededError && !gone.signal.aborted ? error.result : false
    } finally {
      stop?.()
    }
  }
}
