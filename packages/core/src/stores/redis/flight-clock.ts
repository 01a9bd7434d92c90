/**
 * The clock of one grouped Redis flight (groups.ts): how long its node may stay silent before the flight fails. It
 * counts time Redis had to answer, not time this process kept itself from reading the answer (docs/redis.md,
 * "What `timeout` bounds"):
 * - it starts once the work that sent the flight is done (the caller's burst of decisions made in one go);
 * - a timer fires before the event loop reads sockets, so on expiry the reply may be in, unread: the check waits
 *   for the next read of sockets (an immediate), not for more time;
 * - every answer from the flight's node restarts it, its own calls' or an earlier flight's: one connection's calls
 *   are answered in order, so a call cannot be answered while the node is still answering the calls before it;
 * - the time this process spent sending other flights meanwhile (our own work: building thousands of calls in a
 *   flood) is given back. A client that writes a call a turn after it is made (node-redis), or once it has
 *   connected to the node (an ioredis Cluster connects to each master at its first command), writes it only after
 *   that work: without it, the clock of the first call would run out while the process built the next flight.
 */
import type { Timers } from '../../time/timers.js'

/** Time spent by this process on its own sending, ms, counted since it started (see `RedisGroups`). */
export interface OwnWork {
  readonly busyMs: number
}

/** @internal A flight's timeout clock, stopped once the flight ends. */
export class FlightClock {
  readonly #timers: Pick<Timers, 'setTimeout' | 'clearTimeout' | 'setImmediate'>
  readonly #timeoutMs: number
  readonly #own: OwnWork
  readonly #expire: () => void
  #timer: unknown
  /** `own.busyMs` when the clock last started: our work since then is owed back to it. */
  #busyFrom = 0
  #stopped = false

  constructor(
    timers: Pick<Timers, 'setTimeout' | 'clearTimeout' | 'setImmediate'>,
    timeoutMs: number,
    own: OwnWork,
    expire: () => void,
  ) {
    this.#timers = timers
    this.#timeoutMs = timeoutMs
    this.#own = own
    this.#expire = expire
  }

  /** Starts the clock, or starts it again from zero (the node answered). */
  start(): void {
    if (this.#stopped) return
    this.#busyFrom = this.#own.busyMs
    this.#set(this.#timeoutMs)
  }

  stop(): void {
    this.#stopped = true
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer)
    this.#timer = undefined
  }

  #set(ms: number): void {
    const timers = this.#timers
    if (this.#timer !== undefined) timers.clearTimeout(this.#timer)
    const armed = timers.setTimeout(
      () => timers.setImmediate(() => this.#timer === armed && this.#check()),
      ms,
    )
    this.#timer = armed
  }

  /** Time is up, unless our own work took some of it: then that much more. */
  #check(): void {
    if (this.#stopped) return
    const owed = Math.floor(this.#own.busyMs - this.#busyFrom)
    if (owed >= 1) {
      this.#busyFrom += owed
      this.#set(owed)
      return
    }
    this.stop()
    this.#expire()
  }
}
