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
 * The requests waiting for their reserved slots (`RateLimiter.wait`, the HTTP `delay` option), in one binary heap
 * ordered by due time (then by arrival: first come, first served) under a single timer armed for the earliest:
 * no timer per waiting request. A waiting request costs one heap entry and its promise: about 250 bytes on V8
 * (a whole `wait()` call with its result, about 1.2 KB; docs/waiting.md says how this was measured).
 *
 * Time is the platform's `Date.now()` and `setTimeout`, looked up at each use: a test's fake timers drive the
 * waits (advance them to let waiting requests go), as they drive the memory store's default clock.
 * @internal
 */
export class WaitQueue {
  readonly #heap: Waiter[] = []
  #seq = 0
  #timer: { unref?: () => unknown } | undefined
  /** Due time the timer is armed for: once it fires, every waiter due by then goes. */
  #armedFor = Number.POSITIVE_INFINITY

  /** Requests waiting now. */
  get size(): number {
    return this.#heap.length
  }

  /**
   * Resolves after `ms` (at once for 0), or rejects with `signal.reason` when `signal` aborts first (the waiter
   * leaves the queue at once).
   */
  wait(ms: number, signal?: WaitSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason)
    if (ms <= 0) return Promise.resolve()
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { due: Date.now() + ms, seq: this.#seq++, index: 0, resolve, abort: undefined }
      if (signal !== undefined) {
        const onAbort = () => {
          this.#remove(waiter)
          reject(signal.reason)
        }
        signal.addEventListener('abort', onAbort, { once: true })
        waiter.abort = () => signal.removeEventListener('abort', onAbort)
      }
      this.#push(waiter)
      this.#arm()
    })
  }

  /** Lets every waiter whose time has come go, in order, and arms the timer for the next. */
  #fire = (): void => {
    // The timer ran its whole delay: what was due by then goes even if the clock says otherwise (a clock
    // stepped back, or stopped as in the docs' checks).
    const now = Math.max(Date.now(), this.#armedFor)
    this.#timer = undefined
    this.#armedFor = Number.POSITIVE_INFINITY
    const heap = this.#heap
    while (heap.length > 0 && heap[0]!.due <= now) {
      const waiter = this.#pop()
      waiter.abort?.()
      waiter.resolve()
    }
    this.#arm()
  }

  #arm(): void {
    const first = this.#heap[0]
    if (first === undefined) {
      if (this.#timer !== undefined) clearTimeout(this.#timer as never)
      this.#timer = undefined
      this.#armedFor = Number.POSITIVE_INFINITY
      return
    }
    if (this.#timer !== undefined && this.#armedFor <= first.due) return
    if (this.#timer !== undefined) clearTimeout(this.#timer as never)
    // setTimeout takes at most 2^31 − 1 ms: a later due time re-arms when that fires.
    const now = Date.now()
    const ms = Math.min(MAX_TIMEOUT, Math.max(0, first.due - now))
    this.#armedFor = now + ms
    this.#timer = setTimeout(this.#fire, ms)
  }

  #push(waiter: Waiter): void {
    const heap = this.#heap
    waiter.index = heap.length
    heap.push(waiter)
    this.#up(waiter.index)
  }

  #pop(): Waiter {
    const heap = this.#heap
    const top = heap[0]!
    const last = heap.pop()!
    if (last !== top) {
      heap[0] = last
      last.index = 0
      this.#down(0)
    }
    return top
  }

  #remove(waiter: Waiter): void {
    const heap = this.#heap
    const i = waiter.index
    if (heap[i] !== waiter) return
    const last = heap.pop()!
    if (last !== waiter) {
      heap[i] = last
      last.index = i
      this.#down(i)
      this.#up(last.index)
    }
    this.#arm()
  }

  #up(i: number): void {
    const heap = this.#heap
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!before(heap[i]!, heap[parent]!)) break
      this.#swap(i, parent)
      i = parent
    }
  }

  #down(i: number): void {
    const heap = this.#heap
    for (;;) {
      const left = 2 * i + 1
      const right = left + 1
      let first = i
      if (left < heap.length && before(heap[left]!, heap[first]!)) first = left
      if (right < heap.length && before(heap[right]!, heap[first]!)) first = right
      if (first === i) return
      this.#swap(i, first)
      i = first
    }
  }

  #swap(a: number, b: number): void {
    const heap = this.#heap
    const x = heap[a]!
    const y = heap[b]!
    heap[a] = y
    heap[b] = x
    x.index = b
    y.index = a
  }
}

interface Waiter {
  due: number
  /** Arrival order: waiters due at the same time go first come, first served. */
  seq: number
  /** Position in the heap. */
  index: number
  resolve: () => void
  /** Removes the abort listener. */
  abort: (() => void) | undefined
}

const MAX_TIMEOUT = 2 ** 31 - 1

function before(a: Waiter, b: Waiter): boolean {
  return a.due < b.due || (a.due === b.due && a.seq < b.seq)
}
