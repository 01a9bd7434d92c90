/**
 * The calls of a RedisStore whose client has never been ready (it is making its first connection) wait here, unsent
 * and without a clock, then go to their node's queue (groups.ts) once it is ready. A client's connecting
 * is not Redis failing to answer, and before an ioredis Cluster has its slot table it cannot say which node serves a
 * key: sent at once, a flood went to one queue per hash slot (up to 16,384, each bounded like a node, each call with
 * the whole script), into the client's offline queue with a clock running, and two thirds of 5,000 decisions were
 * answered by the failure policy. The wait is bounded: a client that does not become ready within `readyTimeout`
 * fails the calls it held, all with one error (one failure for the breakers, one report). As a flight's clock
 * (flight-clock.ts), the bound counts time the client had to connect, not time this process kept it from doing so:
 * it starts once the work that made the first held call is done (100,000 decisions made in one go take seconds,
 * during which no socket is read), and on expiry waits for the next read of sockets, where `'ready'` may be.
 */
import { RateLimitError } from '../../support/errors.js'
import { REAL_TIMERS } from '../../time/real-timers.js'
import type { Timers } from '../../time/timers.js'
import { shedError } from '../call-bound.js'
import type { RedisScriptRunner } from './clients/index.js'

/** The longest a call waits for its client's first connection, by default, ms (RedisStore's `readyTimeout`). */
export const DEFAULT_READY_TIMEOUT_MS = 2_000

/** Calls held together while the client connects: they go, or fail, together. */
interface Hold {
  readonly promise: Promise<void>
  /** When the hold gives up (real time, ms), about. */
  until: number
  held: number
}

/** @internal One store's wait for its client's first connection. */
export class ReadyGate {
  readonly #runner: RedisScriptRunner
  readonly #timeoutMs: number
  readonly #timers: Pick<Timers, 'now' | 'setTimeout' | 'clearTimeout' | 'setImmediate'>
  #hold: Hold | undefined

  constructor(
    runner: RedisScriptRunner,
    timeoutMs: number,
    timers: Pick<Timers, 'now' | 'setTimeout' | 'clearTimeout' | 'setImmediate'> = REAL_TIMERS,
  ) {
    this.#runner = runner
    this.#timeoutMs = timeoutMs
    this.#timers = timers
  }

  /**
   * `undefined` when a call may go now (the client has been ready, or cannot tell); else a promise that resolves
   * when the client is ready (or has ended: its calls then fail as it answers them), or rejects once `readyTimeout`
   * has passed since the hold began. Past `maxWaiting` calls held, a call is shed.
   */
  wait(maxWaiting: number): Promise<void> | undefined {
    const ready = this.#runner.whenReady?.()
    if (ready === undefined) return undefined
    const hold = this.#hold ?? this.#start(ready)
    if (hold.held >= maxWaiting) {
      return Promise.reject(shedError(Math.max(1, Math.ceil(hold.until - this.#timers.now()))))
    }
    hold.held++
    return hold.promise
  }

  #start(ready: Promise<void>): Hold {
    const timers = this.#timers
    const timeoutMs = this.#timeoutMs
    let timer: unknown
    let settled = false
    const hold: Hold = {
      promise: new Promise<void>((resolve, reject) => {
        const expire = () => {
          if (settled) return
          reject(
            new RateLimitError(
              'ERR_RATEWINDOW_STORE_TIMEOUT',
              `The Redis client (${this.#runner.family}) was not ready within ${timeoutMs} ms (RedisStore's \`readyTimeout\`): it has not connected yet; nothing was sent.`,
            ),
          )
        }
        // Armed once this turn's work is done; on expiry, the sockets are read once more before giving up.
        timers.setImmediate(() => {
          if (settled) return
          hold.until = timers.now() + timeoutMs
          timer = timers.setTimeout(() => timers.setImmediate(expire), timeoutMs)
        })
        ready.then(resolve, reject)
      }),
      until: timers.now() + timeoutMs,
      held: 0,
    }
    const { promise } = hold
    this.#hold = hold
    const ended = () => {
      settled = true
      if (timer !== undefined) timers.clearTimeout(timer)
      if (this.#hold === hold) this.#hold = undefined
    }
    // Registered before any held call's: the gate is clear when they go on.
    promise.then(ended, ended)
    return hold
  }
}
