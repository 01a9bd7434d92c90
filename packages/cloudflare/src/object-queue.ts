/**
 * The calls of a `DurableObjectStore` to each of its objects. The calls of one turn of the event loop for one object
 * go together, in requests of at most `MAX_GROUP` calls sent one after another, and a call's wait is bounded from
 * the moment its request is sent (the store has `boundsWait`). Before, every call of a turn went in one request,
 * which the object decides one call at a time: a flood of one turn (3,000 calls at once from one isolate) took that
 * request past the limiter's `timeout` (250 ms by default), every call in it timed out, and `onStoreError: 'allow'`
 * admitted them all at a limit of 100. Calls of different turns are not queued behind each other: on Workers each
 * turn belongs to one incoming request, whose I/O another request may not do, so each turn sends its own calls.
 * Past `MAX_WAITING` calls of one turn for one object, a call is shed: answered as limited, without a store call.
 */
import { type CallReport, RateLimitError } from '@ratewindow/core'
import type { RemoteAnswer, RemoteCall } from '@ratewindow/core/remote'

/** Calls in one request to an object, at most: the rest of the turn's calls go in the next request. */
export const MAX_GROUP = 100
/** Calls of one turn for one object, at most (RedisStore's `maxWaiting` default): past it, calls are shed. */
export const MAX_WAITING = 50_000

/** How long a call may take once sent, and where its answer goes when it arrives after that. */
export interface ObjectCallBound {
  timeoutMs: number
  /** The answer of a call that timed out, when it arrives after all. */
  late?: ((answer: RemoteAnswer) => void) | undefined
  /** The failure of a call that timed out, when its request fails after all. */
  lose?: ((error: unknown) => void) | undefined
  /** Filled in when the call is sent (`onStoreCall`): how long it waited, and how many calls its request carried. */
  call?: CallReport | undefined
}

/** One request to object `index` carrying `calls`: one answer per call, in order. */
export type SendRequest = (index: number, calls: RemoteCall[]) => Promise<RemoteAnswer[]>

interface Waiting {
  readonly call: RemoteCall
  readonly bound: ObjectCallBound | undefined
  readonly resolve: (answer: RemoteAnswer) => void
  readonly reject: (error: unknown) => void
  /** When it was queued (Date.now()), for its call report. */
  readonly queued: number
  timer: ReturnType<typeof setTimeout> | undefined
  /** Answered: resolved, rejected, or timed out. */
  done: boolean
}

interface Queue {
  readonly index: number
  /** The calls of this turn not sent yet. */
  readonly waiting: Waiting[]
  /** The last request's round trip, ms: the Retry-After of a shed call. */
  roundTripMs: number
}

export class ObjectQueues {
  readonly #send: SendRequest
  readonly #describe: (index: number) => string
  /** The calls of this turn, per object: sent at the end of the turn. */
  readonly #turn = new Map<number, Queue>()
  /** The last round trip to each object, ms. */
  readonly #roundTrips = new Map<number, number>()

  /** `describe` names an object in errors (`<name>:<index>`). */
  constructor(send: SendRequest, describe: (index: number) => string) {
    this.#send = send
    this.#describe = describe
  }

  /** Queues a call for object `index`; its answer, or a rejection (timed out, shed, or its request failed). */
  submit(index: number, call: RemoteCall, bound?: ObjectCallBound): Promise<RemoteAnswer> {
    let queue = this.#turn.get(index)
    if (queue === undefined) {
      const created: Queue = { index, waiting: [], roundTripMs: this.#roundTrips.get(index) ?? 1 }
      this.#turn.set(index, created)
      queueMicrotask(() => {
        this.#turn.delete(index)
        void this.#flush(created)
      })
      queue = created
    }
    if (queue.waiting.length >= MAX_WAITING) return Promise.reject(shed(this.#describe(index), queue))
    const waiting = queue.waiting
    return new Promise<RemoteAnswer>((resolve, reject) => {
      const queued = bound?.call === undefined ? 0 : Date.now()
      waiting.push({ call, bound, resolve, reject, queued, timer: undefined, done: false })
    })
  }

  /** Sends the calls of one turn for one object, `MAX_GROUP` calls at a time, one request after another. */
  async #flush(queue: Queue): Promise<void> {
    while (queue.waiting.length > 0) {
      const group = queue.waiting.splice(0, MAX_GROUP)
      const started = Date.now()
      for (const entry of group) {
        this.#startClock(queue, entry)
        const report = entry.bound?.call
        if (report !== undefined) {
          report.waitedMs = started - entry.queued
          report.groupSize = group.length
        }
      }
      let answers: RemoteAnswer[] | undefined
      let failure: unknown
      try {
        answers = await this.#send(
          queue.index,
          group.map((entry) => entry.call),
        )
      } catch (error) {
        failure = error
      }
      queue.roundTripMs = Math.max(1, Date.now() - started)
      this.#roundTrips.set(queue.index, queue.roundTripMs)
      for (const [i, entry] of group.entries()) {
        if (entry.timer !== undefined) clearTimeout(entry.timer)
        if (entry.done) {
          // Timed out before its answer: the answer goes where late answers go (a late charge is refunded).
          if (answers !== undefined) entry.bound?.late?.(answers[i]!)
          else entry.bound?.lose?.(failure)
          continue
        }
        entry.done = true
        if (answers !== undefined) entry.resolve(answers[i]!)
        else entry.reject(failure)
      }
    }
  }

  /**
   * The call's wait is bounded from now, when it has a bound. When it times out, the calls of its turn still waiting
   * behind its request are answered with the same failure at once, as RedisStore's groups answer what waits behind
   * a flight that timed out: they would wait on that request too (forever, behind a request that never answers),
   * and one failure is what the limiter's breaker counts.
   */
  #startClock(queue: Queue, entry: Waiting): void {
    const timeoutMs = entry.bound?.timeoutMs
    if (timeoutMs === undefined) return
    entry.timer = setTimeout(() => {
      if (entry.done) return
      const failure = new RateLimitError(
        'ERR_RATEWINDOW_STORE_TIMEOUT',
        `DurableObjectStore: object ${this.#describe(queue.index)} took longer than ${timeoutMs} ms.`,
      )
      entry.done = true
      entry.reject(failure)
      for (const waiting of queue.waiting.splice(0)) {
        waiting.done = true
        waiting.reject(failure)
      }
    }, timeoutMs)
  }
}

/** The answer to a call that found the waiting bound full: limited, not a store failure (core's `isShed`). */
function shed(object: string, queue: Queue): RateLimitError {
  return Object.assign(
    new RateLimitError(
      'ERR_RATEWINDOW_SHED',
      `Too many decisions were waiting for Durable Object ${object}: this one was shed (answered as limited) without a store call.`,
    ),
    { retryAfterMs: queue.roundTripMs },
  )
}
