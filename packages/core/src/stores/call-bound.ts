/**
 * What a store that bounds its own waits (`Store.boundsWait`, RedisStore's grouping) hands back to the limiter's
 * gateway besides a decision: a late reply, and the answer to a call it shed. Store-neutral: the gateway and the
 * grouping code both depend on this, not on each other.
 */
import { RateLimitError } from '../support/errors.js'
import type { CallBound, CallReport } from './types.js'

/**
 * A reply that arrives after its decision was answered without it (timed out): for the refund of a late charge. It
 * resolves if the reply comes, rejects if the call fails after all (its connection closed: the store may or may not
 * have applied it), and stays pending while neither happens.
 */
export class LateReply<T> implements PromiseLike<T> {
  #value: T | undefined
  #error: unknown
  #state: 'waiting' | 'arrived' | 'lost' = 'waiting'
  #listeners: { arrived(value: T): void; lost(error: unknown): void }[] | undefined

  /** @internal The store calls it when the reply arrives after all. */
  arrive(value: T): void {
    if (this.#state !== 'waiting') return
    this.#state = 'arrived'
    this.#value = value
    for (const listener of this.#listeners ?? []) listener.arrived(value)
    this.#listeners = undefined
  }

  /** @internal The store calls it when the call fails after its decision was answered: the reply is lost. */
  lose(error: unknown): void {
    if (this.#state !== 'waiting') return
    this.#state = 'lost'
    this.#error = error
    for (const listener of this.#listeners ?? []) listener.lost(error)
    this.#listeners = undefined
  }

  // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose (it settles only if the call does)
  then<A = T, B = never>(
    onArrived?: ((value: T) => A | PromiseLike<A>) | null,
    onLost?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): PromiseLike<A | B> {
    return new Promise<A | B>((resolve, reject) => {
      const listener = {
        arrived: (value: T) => resolve(onArrived ? onArrived(value) : (value as unknown as A)),
        lost: (error: unknown) => (onLost ? resolve(onLost(error)) : reject(error)),
      }
      if (this.#state === 'arrived') listener.arrived(this.#value as T)
      else if (this.#state === 'lost') listener.lost(this.#error)
      else if (this.#listeners === undefined) this.#listeners = [listener]
      else this.#listeners.push(listener)
    })
  }
}

/**
 * A grouped call's bound and its late reply in one object: a `CallBound` whose `late` is itself. The gateway makes
 * one per grouped consume (one object per decision instead of two).
 */
export class LateBound<T> extends LateReply<T> implements CallBound<T> {
  readonly late: LateReply<T> = this

  constructor(
    readonly timeoutMs: number,
    readonly call: CallReport | undefined,
  ) {
    super()
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
