/**
 * Delayed continuations on one timer (`slowDown()`'s delays, and the waits for reserved slots in wait-queue.ts): a
 * binary min-heap of entries ordered by due time (then by arrival), with a single timer armed for the earliest. A
 * delayed request costs one small entry here, not a timer of its own; a cancelled one (its client left) is taken
 * out of the heap at once, so nothing of it stays behind.
 */

import type { DelayTimers } from './timers.js'

// slow-down/ and its tests import the delay's timers from here.
export { type DelayTimers, PLATFORM_TIMERS } from './timers.js'

/** The longest a platform timer can wait (a signed 32-bit ms count); a longer delay re-arms. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** One delayed continuation. */
export class DelayEntry {
  /** Position in the heap; -1 once it ran or was cancelled. */
  index = -1
  constructor(
    readonly due: number,
    readonly seq: number,
    readonly run: () => void,
  ) {}
}

export class DelayQueue {
  readonly #timers: DelayTimers
  readonly #heap: DelayEntry[] = []
  #seq = 0
  #timer: unknown
  /** Due time the timer is armed for; Infinity when none is. */
  #armedFor = Number.POSITIVE_INFINITY
  /** When the armed timer fires, on the queue's clock. */
  #firesAt = Number.NEGATIVE_INFINITY
  /** The time the last timer fired for: the queue's clock never goes back behind it. */
  #floor = Number.NEGATIVE_INFINITY

  constructor(timers: DelayTimers) {
    this.#timers = timers
  }

  /** Delayed continuations waiting now. */
  get size(): number {
    return this.#heap.length
  }

  /** Runs `run` after `ms`; the entry can be cancelled until then. */
  add(ms: number, run: () => void): DelayEntry {
    const entry = new DelayEntry(this.#now() + ms, this.#seq++, run)
    this.#push(entry)
    if (entry.due < this.#armedFor) this.#arm()
    return entry
  }

  /** Takes `entry` out: it never runs. Whether it was still waiting. */
  cancel(entry: DelayEntry): boolean {
    if (entry.index < 0) return false
    this.#remove(entry.index)
    if (this.#heap.length === 0) this.#disarm()
    return true
  }

  readonly #fire = (): void => {
    // The timer fired: its wait has passed, whatever the clock says (a clock stopped by a test's fake `Date`
    // must not hold delayed requests forever).
    if (this.#firesAt > this.#floor) this.#floor = this.#firesAt
    this.#timer = undefined
    this.#armedFor = Number.POSITIVE_INFINITY
    this.#firesAt = Number.NEGATIVE_INFINITY
    const now = this.#now()
    const heap = this.#heap
    const due: DelayEntry[] = []
    while (heap.length > 0 && heap[0]!.due <= now) {
      const entry = heap[0]!
      this.#remove(0)
      due.push(entry)
    }
    if (heap.length > 0) this.#arm()
    for (const entry of due) {
      try {
        entry.run()
      } catch {
        // The continuations are the adapters' own and report their failures themselves.
      }
    }
  }

  /** The clock, never behind the time the last timer fired for: it only moves forward. */
  #now(): number {
    return Math.max(this.#timers.now(), this.#floor)
  }

  #arm(): void {
    this.#disarm()
    const first = this.#heap[0]
    if (first === undefined) return
    const now = this.#now()
    const ms = Math.min(MAX_TIMER_MS, Math.max(0, first.due - now))
    this.#armedFor = first.due
    this.#firesAt = now + ms
    this.#timer = this.#timers.setTimeout(this.#fire, ms)
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer)
    this.#timer = undefined
    this.#armedFor = Number.POSITIVE_INFINITY
    this.#firesAt = Number.NEGATIVE_INFINITY
  }

  #push(entry: DelayEntry): void {
    entry.index = this.#heap.length
    this.#heap.push(entry)
    this.#up(entry.index)
  }

  #remove(index: number): void {
    const heap = this.#heap
    const removed = heap[index]!
    const last = heap.pop()!
    removed.index = -1
    if (last === removed) return
    heap[index] = last
    last.index = index
    this.#down(index)
    this.#up(last.index)
  }

  #before(a: DelayEntry, b: DelayEntry): boolean {
    return a.due < b.due || (a.due === b.due && a.seq < b.seq)
  }

  #up(index: number): void {
    const heap = this.#heap
    const entry = heap[index]!
    while (index > 0) {
      const parentIndex = (index - 1) >> 1
      const parent = heap[parentIndex]!
      if (!this.#before(entry, parent)) break
      heap[index] = parent
      parent.index = index
      index = parentIndex
    }
    heap[index] = entry
    entry.index = index
  }

  #down(index: number): void {
    const heap = this.#heap
    const entry = heap[index]!
    const length = heap.length
    for (;;) {
      const left = 2 * index + 1
      if (left >= length) break
      const right = left + 1
      const child = right < length && this.#before(heap[right]!, heap[left]!) ? right : left
      if (!this.#before(heap[child]!, entry)) break
      heap[index] = heap[child]!
      heap[index]!.index = index
      index = child
    }
    heap[index] = entry
    entry.index = index
  }
}

const queues = new WeakMap<DelayTimers, DelayQueue>()

/** The one queue of `timers`: every slowDown middleware of a process shares the platform's (one timer). */
export function delayQueueOf(timers: DelayTimers): DelayQueue {
  let queue = queues.get(timers)
  if (queue === undefined) {
    queue = new DelayQueue(timers)
    queues.set(timers, queue)
  }
  return queue
}
