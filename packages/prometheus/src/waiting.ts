/**
 * The requests of one process admitted with a delay (`delay`, `wait()`) whose slot has not come yet, per limiter
 * label: counted when Prometheus asks (at each scrape), with no timer per request. A waiter that gave up (its
 * client left, its signal aborted) is counted until its slot's time: the decision event is all it sees.
 */
export class WaitingRequests {
  /** Limiter label → the times (local `performance.now()`, ms) at which its waiting requests go. */
  readonly #until = new Map<string, number[]>()
  readonly #clock: () => number
  /** The length at which `add` forgets the slots already come, so that no scrape is needed to bound memory. */
  #pruneAt = 1024

  constructor(clock: () => number = () => performance.now()) {
    this.#clock = clock
  }

  /** A request of `limiter` goes in `delayMs`. */
  add(limiter: string, delayMs: number): void {
    let list = this.#until.get(limiter)
    if (list === undefined) {
      list = []
      this.#until.set(limiter, list)
    }
    const now = this.#clock()
    if (list.length >= this.#pruneAt) {
      list = list.filter((until) => until > now)
      this.#until.set(limiter, list)
      this.#pruneAt = Math.max(1024, 2 * list.length)
    }
    list.push(now + delayMs)
  }

  /** Per limiter label, the requests still waiting now; forgets those whose slot came. */
  count(): Map<string, number> {
    const now = this.#clock()
    const counts = new Map<string, number>()
    for (const [limiter, list] of this.#until) {
      const waiting = list.filter((until) => until > now)
      this.#until.set(limiter, waiting)
      counts.set(limiter, waiting.length)
    }
    return counts
  }
}
