import { DelayQueue } from './delay-queue.js'
import { PLATFORM_STEADY_TIMERS } from './timers.js'

/**
 * The part of an `AbortSignal` a wait uses: core's public types depend neither on Node's nor on the DOM's (an
 * `AbortSignal` fits).
 */
export interface WaitSignal {
  readonly aborted: boolean
  readonly reason?: unknown
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void
  removeEventListener(type: 'abort', listener: () => void): void
}

/**
 * The requests waiting for their reserved slots (`RateLimiter.wait`, the HTTP `delay` option) of one limiter, on a
 * `DelayQueue` of its own (delay-queue.ts, the heap `slowDown()` uses too): ordered by due time, then by arrival
 * (first come, first served), under a single timer armed for the earliest: no timer per waiting request. A waiting
 * request costs one heap entry and its promise: about 250 bytes on V8 (a whole `wait()` call with its result,
 * about 1.2 KB; docs/waiting.md says how this was measured).
 *
 * Waits are measured on the platform's steady clock (`performance.now()`) and `setTimeout`, looked up at each use,
 * never on the wall clock: a jump of the process's wall clock while requests wait moves none of them, and the
 * store's clock alone decides the slots. A test's fake timers drive the waits (advance them to let
 * waiting requests go).
 * @internal
 */
export class WaitQueue {
  /**
   * The smallest (steady local time when a reservation's answer was seen − the store's time of its decision) so
   * far: the store's clock in local time plus the quickest answer. A slot `at` (store time) is due locally at `at` + this:
   * never before the slot (the answer cannot arrive before the decision), and as close to it as the quickest
   * answer, however long this one took (a burst, a slow round trip). 0 until a store has answered.
   */
  #storeOffset = Number.POSITIVE_INFINITY
  /**
   * The queue runs on the store's clock as seen from here (local time − the offset): every slot waiting is due at
   * its own `at`, so that they go in slot order (first come, first served) even when the offset shrinks between
   * two answers, and each goes as soon as the latest offset allows.
   */
  readonly #queue = new DelayQueue({
    now: () =>
      PLATFORM_STEADY_TIMERS.now() - (this.#storeOffset === Number.POSITIVE_INFINITY ? 0 : this.#storeOffset),
    setTimeout: PLATFORM_STEADY_TIMERS.setTimeout,
    clearTimeout: PLATFORM_STEADY_TIMERS.clearTimeout,
  })

  /** Requests waiting now. */
  get size(): number {
    return this.#queue.size
  }

  /**
   * Resolves at the slot `at` the store decided (its clock) `delay` ms before it, as seen from here, and not before
   * `sentAt` + `delay` (steady time) when the call's sending time is known; rejects as `wait` does.
   */
  waitForSlot(at: number, delay: number, signal?: WaitSignal, sentAt?: number): Promise<void> {
    const now = PLATFORM_STEADY_TIMERS.now()
    this.#storeOffset = Math.min(this.#storeOffset, now - (at - delay))
    const queued = this.wait(at + this.#storeOffset - now, signal)
    if (sentAt === undefined) return queued
    // Never before `sentAt` + `delay` (steady time): the store decided after the call was sent, so its slot is at
    // least `delay` after that. This holds when a later answer shows the store's clock ahead by more than any
    // answer's latency (the store's clock jumped forward: MemoryStore's Date.now(), a Redis failover): the queue's
    // clock then leaps, and without this bound every waiter due within the jump would go at once.
    return queued.then(() => {
      const rest = sentAt + delay - PLATFORM_STEADY_TIMERS.now()
      return rest > 0 ? this.wait(rest, signal) : undefined
    })
  }

  /** The steady time now, for `waitForSlot`'s `sentAt`. */
  now(): number {
    return PLATFORM_STEADY_TIMERS.now()
  }

  /**
   * Resolves after `ms` (at once for 0 or less when nothing else waits), or rejects with `signal.reason` when `signal` aborts first (the waiter
   * leaves the queue at once).
   */
  wait(ms: number, signal?: WaitSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason)
    // A slot already passed goes at once, unless slots are queued (their timer late): then behind those due
    // before it, in slot order.
    if (ms <= 0 && this.#queue.size === 0) return Promise.resolve()
    return new Promise<void>((resolve, reject) => {
      if (signal === undefined) {
        this.#queue.add(ms, resolve)
        return
      }
      const onAbort = () => {
        if (this.#queue.cancel(entry)) reject(signal.reason)
      }
      const entry = this.#queue.add(ms, () => {
        signal.removeEventListener('abort', onAbort)
        resolve()
      })
      signal.addEventListener('abort', onAbort, { once: true })
    })
  }
}
