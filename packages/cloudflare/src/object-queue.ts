/**
 * The calls of a `DurableObjectStore` to each of its objects. The calls of one turn of the event loop go together
 * in one request; while a request is in flight to an object, the calls that arrive for it wait here, unsent and
 * without a clock, and go in the next request: one request in flight per object, at most `MAX_GROUP` calls each.
 * A call's wait is bounded from the moment its request is sent (the store has `boundsWait`), so that time spent
 * behind a flood in this queue never counts as a store failure. Before, every call of a flood went in one request,
 * which the object decides one call at a time: past the limiter's `timeout` (250 ms by default) every call of it
 * timed out and `onStoreError: 'allow'` admitted all of them (3,000 at a limit of 100). Past `MAX_WAITING` calls
 * waiting for one object, a call is shed: answered as limited, without a store call, as RedisStore sheds.
 */
import { type CallReport, RateLimitError } from '@ratewindow/core'
import type { RemoteAnswer, RemoteCall } from '@ratewindow/core/remote'

/** Calls in one request to an object, at most: a larger group waits for the next request. */
export const MAX_GROUP = 100
/** Calls waiting for one object, at most (RedisStore's `maxWaiting` default): past it, calls are shed. */
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
  readonly waiting: Waiting[]
  /** A request is in flight to the object. */
  sending: boolean
  /** A send is scheduled for the end of this turn. */
  scheduled: boolean
  /** The last request's round trip, ms: the Retry-After of a shed call. */
  roundTripMs: number
}

export class ObjectQueues {
  readonly #send: SendRequest
  readonly #describe: (index: number) => string
  readonly #queues = new Map<number, Queue>()

  /** `describe` names an object in errors (`<name>:<index>`). */
  constructor(send: SendRequest, describe: (index: number) => string) {
    this.#send = send
    this.#describe = describe
  }

  /** Queues a call for object `index`; its answer, or a rejection (timed out, shed, or its request failed). */
  submit(index: number, call: RemoteCall, bound?: ObjectCallBound): Promise<RemoteAnswer> {
    let queue = this.#queues.get(index)
    if (queue === undefined) {
      queue = { index, waiting: [], sending: false, scheduled: false, roundTripMs: 1 }
      this.#queues.set(index, queue)
    }
    if (queue.waiting.length >= MAX_WAITING) return Promise.reject(shed(this.#describe(index), queue))
    const scheduled = queue
    return new Promise<RemoteAnswer>((resolve, reject) => {
      const queued = bound?.call === undefined ? 0 : Date.now()
      scheduled.waiting.push({ call, bound, resolve, reject, queued, timer: undefined, done: false })
      if (scheduled.sending || scheduled.scheduled) return
      scheduled.scheduled = true
      queueMicrotask(() => {
        scheduled.scheduled = false
        void this.#flush(scheduled)
      })
    })
  }

  /** Sends what waits for one object, `MAX_GROUP` calls at a time, one request after another. */
  async #flush(queue: Queue): Promise<void> {
    while (!queue.sending && queue.waiting.length > 0) {
      const group = queue.waiting.splice(0, MAX_GROUP)
      queue.sending = true
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
      queue.sending = false
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

  /** The call's wait is bounded from now, when it has a bound. */
  #startClock(queue: Queue, entry: Waiting): void {
    const timeoutMs = entry.bound?.timeoutMs
    if (timeoutMs === undefined) return
    entry.timer = setTimeout(() => {
      if (entry.done) return
      entry.done = true
      entry.reject(
        new RateLimitError(
          'ERR_RATEWINDOW_STORE_TIMEOUT',
          `DurableObjectStore: object ${this.#describe(queue.index)} took longer than ${timeoutMs} ms.`,
        ),
      )
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
