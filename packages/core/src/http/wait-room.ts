/**
 * The wait room of option `delay`: the places of requests waiting for a reserved slot, bounded in all
 * (`maxWaiting`) and per key (`maxPerKey`), and the wait itself, given up when the client leaves.
 */
import type { RateLimiter } from '../limiter/limiter.js'
import type { RateLimitResult } from '../result.js'
import type { FrameworkBinding } from './binding.js'

/** The places of one middleware's waiting requests, and their waits. */
export class WaitRoom<Req> {
  readonly #maxWaiting: number
  readonly #maxPerKey: number
  readonly #binding: FrameworkBinding<Req>
  #waiting = 0
  readonly #waitingPerKey = new Map<string, number>()

  constructor(bounds: { maxWaiting: number; maxPerKey: number }, binding: FrameworkBinding<Req>) {
    this.#maxWaiting = bounds.maxWaiting
    this.#maxPerKey = bounds.maxPerKey
    this.#binding = binding
  }

  /**
   * Takes a place for a request of `key`; false when a bound is reached. Taken before the store call, so that
   * concurrent decisions cannot all pass the bounds; `leave` gives it up.
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

  /**
   * Waits under the limiter's one timer until the reserved slot of `result` comes: true then, false when the
   * client of `request` disconnected first (the binding's `onClose`).
   */
  async wait(limiter: RateLimiter, result: RateLimitResult, request: Req): Promise<boolean> {
    const gone = new AbortController()
    const stop = this.#binding.onClose?.(request, () => gone.abort())
    try {
      await limiter.waitForSlot(result, gone.signal)
      return true
    } catch {
      return false
    } finally {
      stop?.()
    }
  }
}
