/**
 * What a store that bounds its own waits (`Store.boundsWait`, RedisStore's grouping) hands back to the limiter's
 * gateway besides a decision: a late reply, and the answer to a call it shed. Store-neutral: the gateway and the
 * grouping code both depend on this, not on each other.
 */
import { RateLimitError } from '../support/errors.js'

/** A reply that arrives after its decision was answered without it (timed out): for the refund of a late charge. */
export class LateReply<T> implements PromiseLike<T> {
  #value: T | undefined
  #arrived = false
  #listeners: ((value: T) => void)[] | undefined

  /** @internal The store calls it when the reply arrives after all. */
  arrive(value: T): void {
    if (this.#arrived) return
    this.#arrived = true
    this.#value = value
    for (const listener of this.#listeners ?? []) listener(value)
    this.#listeners = undefined
  }

  // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose (it resolves only if the reply comes)
  then<A = T, B = never>(
    onArrived?: ((value: T) => A | PromiseLike<A>) | null,
    _onFailed?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): PromiseLike<A | B> {
    return new Promise<A | B>((resolve) => {
      const listener = (value: T) => resolve(onArrived ? onArrived(value) : (value as unknown as A))
      if (this.#arrived) listener(this.#value as T)
      else if (this.#listeners === undefined) this.#listeners = [listener]
      else this.#listeners.push(listener)
    })
  }
}

/** The answer to a call that found the waiting bound full: not a store failure. */
export function shedError(roundTripMs: number): RateLimitError {
  return Object.assign(
    new RateLimitError(
      'ERR_RATEWINDOW_SHED',
      'Too many decisions were waiting for this Redis node: this one was shed (answered as limited) without a store call.',
    ),
    { retryAfterMs: roundTripMs },
  )
}

/** True for the error of a shed call. */
export function isShed(error: unknown): error is RateLimitError & { retryAfterMs: number } {
  return error instanceof RateLimitError && error.code === 'ERR_RATEWINDOW_SHED'
}
