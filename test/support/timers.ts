import type { DelayTimers } from '@ratewindow/core'
import type { ManualClock } from './clock.js'

interface Pending {
  at: number
  ms: number
  callback: () => void
}

/**
 * Timers on a driven clock (slowDown's `timers` option): a timer fires only when `advance` moves the clock past
 * it, so a delayed request waits for the test, not for real time. `armed()` resolves when a timer is set.
 */
export class ManualTimers implements DelayTimers {
  readonly #clock: ManualClock
  readonly #pending = new Map<number, Pending>()
  #next = 1
  #onSet: ((ms: number) => void)[] = []
  #onClear: (() => void)[] = []
  /** Every `setTimeout` so far: its ms. */
  readonly set: number[] = []

  constructor(clock: ManualClock) {
    this.#clock = clock
  }

  readonly now = (): number => this.#clock.now

  readonly setTimeout = (callback: () => void, ms: number): number => {
    const id = this.#next++
    this.#pending.set(id, { at: this.#clock.now + ms, ms, callback })
    this.set.push(ms)
    for (const resolve of this.#onSet.splice(0)) resolve(ms)
    return id
  }

  readonly clearTimeout = (id: unknown): void => {
    if (this.#pending.delete(id as number)) for (const resolve of this.#onClear.splice(0)) resolve()
  }

  /** Timers waiting now. */
  get pending(): number {
    return this.#pending.size
  }

  /** Resolves with the ms of the next timer set (race it with what else may happen). */
  armed(): Promise<number> {
    return new Promise<number>((resolve) => this.#onSet.push(resolve))
  }

  /** Resolves when a pending timer is cleared. */
  cleared(): Promise<void> {
    return bounded(new Promise<void>((resolve) => this.#onClear.push(resolve)), 'a timer to be cleared')
  }

  /** Moves the clock forward by `ms`, firing each timer due on the way, in time order. */
  advance(ms: number): void {
    const target = this.#clock.now + ms
    for (;;) {
      let first: [number, Pending] | undefined
      for (const entry of this.#pending) if (first === undefined || entry[1].at < first[1].at) first = entry
      if (first === undefined || first[1].at > target) break
      this.#pending.delete(first[0])
      if (first[1].at > this.#clock.now) this.#clock.set(first[1].at)
      first[1].callback()
    }
    this.#clock.set(target)
  }
}

function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), 5_000)
  })
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer))
}
