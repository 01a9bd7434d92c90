/**
 * Grouping of Redis calls: while a call is in flight to a Redis node, the calls that arrive for that node wait
 * for the end of the event loop's turn and go together, as one script execution per script and hash slot. No
 * timer and no added latency when idle: a call is sent at once when nothing is in flight to its node.
 */

import { RateLimitError } from '../../support/errors.js'
import { fakeTimersHint, REAL_TIMERS } from '../../time/real-timers.js'
import type { Timers } from '../../time/timers.js'
import { shedError } from '../call-bound.js'
import { failureKind } from '../failure-kind.js'
import type { CallReport } from '../types.js'
import { FlightClock } from './flight-clock.js'

/** Decisions waiting for one node, at most, by default: a flood of 30,000 in one process fits. */
export const DEFAULT_MAX_WAITING = 50_000
/** Decisions in one script execution, at most: a larger group is split into several calls of one flight. */
export const DEFAULT_MAX_GROUP = 1_000
/**
 * Decisions handed to the client for one node and not yet answered, at most (two full calls): the rest of a flood
 * waits in our queue, unsent and without a clock, and goes as the node answers. A client that queues what it is
 * given (node-redis writes a little per turn and times out a command not written within 5 s; GLIDE times out a
 * request 250 ms after it is made, however long it waited behind others) then never holds a call long enough for
 * its own clock, or ours, to count our queue as a Redis failure.
 */
export const DEFAULT_MAX_PENDING = 2 * DEFAULT_MAX_GROUP
/**
 * Flights in flight to one node, at most: past it, what waits goes when the oldest flight is answered. Paired
 * runs (docs/redis.md, "Grouped decisions") measured 1 flight at a time at 0.87 of the req/s of 2, 2 at 0.88 of
 * 4, 4 at 0.95 of 16, 16 at 0.99 of 64: waiting for a reply before sending the next group costs more than it saves.
 */
export const DEFAULT_MAX_FLIGHTS = 16

/** How a grouped call waits: the longest wait for its own flight, and where a late reply goes. */
export interface Within<T> {
  /** The longest wait for a sent call, ms; none when undefined (the client's own timeouts then bound it). */
  timeoutMs?: number | undefined
  late?: { arrive(value: T): void; lose?(error: unknown): void } | undefined
  /** Filled in when the call is sent: how long it waited, and the size of its call. */
  call?: CallReport | undefined
}

/** One call waiting to be sent: it joins the call of its `batch` (same script, same hash slot). */
export interface Entry<P, T> {
  /** Calls with the same batch go in one script execution. */
  readonly batch: string
  readonly payload: P
  readonly timeoutMs: number | undefined
  readonly late: { arrive(value: T): void; lose?(error: unknown): void } | undefined
  /** Measured only when asked for: when it was queued (performance.now()), and where to report. */
  readonly call: CallReport | undefined
  readonly queued: number
  resolve(value: T): void
  reject(error: unknown): void
  /** Set once answered (resolved, rejected, or timed out). */
  done?: boolean
}

/** An entry's resolve and reject until its promise is made (just after: the executor runs at once). */
function settleLater(): void {}

/** Sends one batch (entries of one script and slot, at most `maxGroup`) and answers one value per entry. */
export type SendBatch<P, T> = (entries: readonly Entry<P, T>[]) => Promise<readonly T[]>

/**
 * Runs `send` (which sends several batches to the node of `first`) so that they go out together, e.g. in one
 * write: `RedisScriptRunner.together`. Calls `send` once, synchronously.
 */
export type SendTogether<P> = (first: P, send: () => void) => void

/** Calls sent together to one node, answered when all of its calls are. */
interface Flight<T> {
  readonly entries: readonly Entry<unknown, T>[]
  ended: boolean
  end(): void
  /** The node answered a call: this flight's clock starts again. */
  heard(): void
}

/** The queue of one node. */
interface NodeQueue<P, T> {
  readonly node: string | number
  /** Flights sent and not yet answered, oldest first. */
  flights: Set<Flight<T>>
  waiting: Entry<P, T>[]
  /** A flush of `waiting` is scheduled for the end of this turn of the event loop. */
  flushing: boolean
  /** The last flight's round trip, ms: the Retry-After of a shed decision. */
  roundTripMs: number
  /** Decisions in the unanswered calls of the flights in flight (`maxPending`). */
  pending: number
}

export interface GroupStats {
  /** Flights sent, script executions sent, and the entries they carried. */
  flights: number
  calls: number
  entries: number
  /** Entries refused because the waiting bound was full. */
  shed: number
  /** The largest number waiting for one node so far. */
  peakWaiting: number
}

/**
 * One queue per node of one client. An entry that finds nothing in flight to its node flies at once, alone. Entries
 * that arrive while a flight is in flight wait for the end of the event loop's turn (an immediate, once per turn),
 * when everything waiting goes in one flight; with `maxFlights` in flight, they wait for the oldest to end, and with
 * `maxCalls` calls in flight on the client (all nodes), for calls to end. A flight that times out or fails on the
 * server answers every entry in flight to its node and every one waiting with the same error at once (one failure
 * for breakers to count, and no second wait). A key's own error (a script error) answers only its call.
 */
export class RedisGroups<P, T> {
  readonly #send: SendBatch<P, T>
  readonly #maxWaiting: number
  readonly #maxGroup: number
  readonly #maxFlights: number
  readonly #maxCalls: number
  readonly #maxPending: number
  readonly #together: SendTogether<P> | undefined
  readonly #timers: Pick<Timers, 'now' | 'setTimeout' | 'clearTimeout' | 'setImmediate'>
  readonly #queues = new Map<string | number, NodeQueue<P, T>>()
  /** Calls sent and not yet settled by the client, on every node. */
  #calls = 0
  /** Queues with entries that wait for calls in flight to end (`maxCalls`). */
  readonly #starved = new Set<NodeQueue<P, T>>()
  /** Time spent sending flights, ms, since this client's groups began: given back to the clocks (flight-clock.ts). */
  readonly #own = { busyMs: 0 }
  readonly stats: GroupStats = { flights: 0, calls: 0, entries: 0, shed: 0, peakWaiting: 0 }

  /** `maxWaiting` is the default bound: each call may pass its own (RedisStore's option) to `submit`. */
  constructor(
    send: SendBatch<P, T>,
    options: {
      maxWaiting?: number
      maxGroup?: number
      maxFlights?: number
      /**
       * Calls in flight on the client, all nodes together, at most (`RedisScriptRunner.maxInFlight`: Valkey GLIDE
       * refuses requests past its `inflightRequestsLimit`). Past it, what waits stays in our queue, unsent and
       * without a clock. @default Infinity
       */
      maxCalls?: number
      /** Decisions in flight to one node, at most; one call goes whatever its size when none is. @default 2000 */
      maxPending?: number
      /** How a flight of several batches to one node goes out together, if the client can. */
      together?: SendTogether<P> | undefined
      /**
       * The timers of the timeouts and of the end-of-turn flush, and the clock that measures our own sending work:
       * real ones by default, even under a test's fake timers (real-timers.ts); a unit test passes its own.
       */
      timers?: Pick<Timers, 'now' | 'setTimeout' | 'clearTimeout' | 'setImmediate'>
    } = {},
  ) {
    this.#timers = options.timers ?? REAL_TIMERS
    this.#send = send
    this.#maxWaiting = options.maxWaiting ?? DEFAULT_MAX_WAITING
    this.#maxGroup = options.maxGroup ?? DEFAULT_MAX_GROUP
    this.#maxFlights = options.maxFlights ?? DEFAULT_MAX_FLIGHTS
    this.#maxCalls = options.maxCalls ?? Number.POSITIVE_INFINITY
    this.#maxPending = options.maxPending ?? DEFAULT_MAX_PENDING
    this.#together = options.together
  }

  /** Queues a call for `node`; sends it at once when nothing is in flight there. */
  submit(
    node: string | number,
    batch: string,
    payload: P,
    within: Within<T> | undefined,
    maxWaiting = this.#maxWaiting,
  ): Promise<T> {
    const entry: Entry<P, T> = {
      batch,
      payload,
      timeoutMs: within?.timeoutMs,
      late: within?.late,
      call: within?.call,
      queued: within?.call === undefined ? 0 : performance.now(),
      resolve: settleLater,
      reject: settleLater,
      // Set here, not added when answered: an entry keeps one shape (no property store grown per entry).
      done: false,
    }
    // PERF: the executor keeps only the entry (a closure over everything here cost a larger context).
    const answer = new Promise<T>((resolve, reject) => {
      entry.resolve = resolve
      entry.reject = reject
    })
    let queue = this.#queues.get(node)
    if (queue === undefined) {
      queue = { node, flights: new Set(), waiting: [], flushing: false, roundTripMs: 1, pending: 0 }
      this.#queues.set(node, queue)
    }
    if (queue.flights.size === 0 && queue.waiting.length === 0) {
      this.#fly(queue, [entry])
    } else if (queue.waiting.length >= maxWaiting) {
      this.stats.shed++
      entry.reject(shedError(queue.roundTripMs))
    } else {
      queue.waiting.push(entry)
      if (queue.waiting.length > this.stats.peakWaiting) this.stats.peakWaiting = queue.waiting.length
      this.#flushLater(queue)
    }
    return answer
  }

  /** Sends what waits for the queue's node at the end of this turn of the event loop, once, if a flight may go. */
  #flushLater(queue: NodeQueue<P, T>): void {
    if (queue.flushing || queue.flights.size >= this.#maxFlights || queue.pending >= this.#maxPending) return
    if (this.#calls >= this.#maxCalls) {
      this.#starved.add(queue)
      return
    }
    queue.flushing = true
    this.#timers.setImmediate(() => {
      queue.flushing = false
      if (queue.waiting.length === 0 || queue.flights.size >= this.#maxFlights) return
      const next = queue.waiting
      queue.waiting = []
      this.#fly(queue, next)
    })
  }

  /** A call ended (answered or failed by the client): queues that waited for room may send, oldest first. */
  #callEnded(): void {
    this.#calls--
    let room = this.#maxCalls - this.#calls
    for (const queue of this.#starved) {
      if (room <= 0) break
      this.#starved.delete(queue)
      if (queue.waiting.length === 0) continue
      this.#flushLater(queue)
      room--
    }
  }

  #fly(queue: NodeQueue<P, T>, ready: Entry<P, T>[]): void {
    const began = this.#timers.now()
    try {
      this.#sendFlight(queue, ready)
    } finally {
      this.#own.busyMs += this.#timers.now() - began
    }
  }

  #sendFlight(queue: NodeQueue<P, T>, ready: Entry<P, T>[]): void {
    const { batches, entries } = this.#roomFor(queue, ready)
    if (batches.length === 0) return
    // Real time even under a test's fake timers (real-timers.ts).
    const timers = this.#timers
    const started = performance.now()
    this.stats.flights++
    this.stats.calls += batches.length
    this.stats.entries += entries.length
    this.#calls += batches.length
    queue.pending += entries.length
    let open = batches.length
    /** Decisions of this flight not answered yet: the node's `pending` while the flight lasts. */
    let unsettled = entries.length
    /** A call of this flight was answered or failed: its decisions leave the node's `pending`. */
    const settled = (batch: readonly Entry<P, T>[]) => {
      this.#callEnded()
      if (flight.ended) return
      unsettled -= batch.length
      queue.pending -= batch.length
    }
    let timeoutMs: number | undefined
    for (const entry of entries) {
      if (entry.timeoutMs !== undefined && (timeoutMs === undefined || entry.timeoutMs < timeoutMs))
        timeoutMs = entry.timeoutMs
    }
    /** No answer from the node within the timeout (flight-clock.ts). */
    const expire = () => {
      if (flight.ended) return
      failNode(
        queue,
        new RateLimitError(
          'ERR_RATEWINDOW_STORE_TIMEOUT',
          `Redis did not answer a call of ${entries.length} grouped decision${entries.length === 1 ? '' : 's'} within ${timeoutMs} ms.${fakeTimersHint()}`,
        ),
      )
    }
    const clock = timeoutMs === undefined ? undefined : new FlightClock(timers, timeoutMs, this.#own, expire)
    const flight: Flight<T> = {
      entries,
      ended: false,
      /** Ends the flight: whatever waits goes at the end of this turn (unless a failure answered it). */
      end: () => {
        if (flight.ended) return
        flight.ended = true
        clock?.stop()
        // A failed flight's calls no longer hold the node: their replies, if they come, reach only late hooks.
        queue.pending -= unsettled
        unsettled = 0
        queue.roundTripMs = Math.max(1, Math.ceil(performance.now() - started))
        queue.flights.delete(flight)
        const node = queue.node
        if (queue.waiting.length > 0) this.#flushLater(queue)
        else if (queue.flights.size === 0 && this.#queues.size > 1 && this.#queues.get(node) === queue)
          this.#queues.delete(node)
      },
      heard: () => clock?.start(),
    }
    queue.flights.add(flight)
    // The clock starts once the work that sent the flight is done.
    if (clock !== undefined) timers.setImmediate(() => clock.start())
    /** The node answered a call: every flight in flight to it starts its clock again. */
    const heard = () => {
      for (const each of queue.flights) each.heard()
    }
    const sendBatch = (batch: Entry<P, T>[]) => {
      for (const entry of batch) {
        if (entry.call !== undefined) {
          entry.call.waitedMs = started - entry.queued
          entry.call.groupSize = batch.length
        }
      }
      let sent: Promise<readonly T[]>
      try {
        sent = this.#send(batch)
      } catch (error) {
        sent = Promise.reject(error)
      }
      sent.then(
        (values) => {
          settled(batch)
          for (let i = 0; i < batch.length; i++) answer(batch[i]!, values[i], undefined)
          if (--open === 0) flight.end()
          else if (queue.waiting.length > 0) this.#flushLater(queue)
          heard()
        },
        (error: unknown) => {
          settled(batch)
          // A key's own error (a script error) answers its call; any other is the node's: see `failNode`.
          if (failureKind(error) === 'key' || flight.ended) {
            for (const entry of batch) answer(entry, undefined, error)
            if (failureKind(error) === 'key') heard()
          } else {
            failNode(queue, error)
            // This call was sent: the store may have run it before the failure (a connection closed with it).
            for (const entry of batch) answer(entry, undefined, error)
          }
          if (--open === 0) flight.end()
          else if (queue.waiting.length > 0) this.#flushLater(queue)
        },
      )
    }
    if (batches.length === 1 || this.#together === undefined) {
      for (const batch of batches) sendBatch(batch)
      return
    }
    // Several calls to one node: written together where the client can (one write instead of one per call).
    let next = 0
    const sendAll = () => {
      while (next < batches.length) sendBatch(batches[next++]!)
    }
    try {
      this.#together(entries[0]!.payload, sendAll)
    } catch {
      // the client's own trouble: the batches it did not send go below, one by one
    }
    // A `together` that failed, or did not call `send`: whatever it did not send goes now, once.
    sendAll()
  }

  /**
   * The calls of `ready` that may go now: while the node has fewer than `maxPending` decisions in flight (one call
   * at least when it has none) and the client fewer than `maxCalls` calls. The entries of the others go back to the
   * front of the queue, in their order, and go as calls end (they join what arrives meanwhile: larger groups).
   */
  #roomFor(
    queue: NodeQueue<P, T>,
    ready: Entry<P, T>[],
  ): { batches: Entry<P, T>[][]; entries: Entry<P, T>[] } {
    const batches = callsOf(ready, this.#maxGroup)
    let taken = 0
    let decisions = queue.pending
    for (const batch of batches) {
      if (this.#calls + taken >= this.#maxCalls) break
      if (decisions > 0 && decisions + batch.length > this.#maxPending) break
      decisions += batch.length
      taken++
    }
    if (taken === batches.length) return { batches, entries: ready }
    const sent = batches.slice(0, taken)
    const going = new Set(sent.flat())
    const entries = taken === 0 ? [] : ready.filter((entry) => going.has(entry))
    const left = taken === 0 ? ready : ready.filter((entry) => !going.has(entry))
    queue.waiting = queue.waiting.length === 0 ? left : [...left, ...queue.waiting]
    if (this.#calls + taken >= this.#maxCalls) this.#starved.add(queue)
    return { batches: sent, entries }
  }
}

/**
 * The node failed (an error, or no answer to a sent call in time): every decision in flight to it and every one
 * waiting gets `error` at once, the same object (one failure for breakers to count), and the flights end (their
 * replies, if they come, still reach the entries' late hooks). Redis answers one connection's calls in order,
 * so the calls sent after the failed one could not have been answered before it.
 */
function failNode<T>(queue: NodeQueue<unknown, T>, error: unknown): void {
  const waiting = queue.waiting
  queue.waiting = []
  for (const flight of [...queue.flights]) {
    for (const entry of flight.entries) answer(entry, undefined, error)
    flight.end()
  }
  for (const entry of waiting) answer(entry, undefined, error)
}

/**
 * Answers an entry once; what comes after the entry was answered goes to its late hook: the reply, or the failure of
 * a call that was sent (the reply is lost). An entry answered while waiting was never sent: nothing comes after.
 */
function answer<P, T>(entry: Entry<P, T>, value: T | undefined, error: unknown): void {
  if (entry.done) {
    if (error === undefined) entry.late?.arrive(value as T)
    else entry.late?.lose?.(error)
    return
  }
  entry.done = true
  if (error === undefined) entry.resolve(value as T)
  else entry.reject(error)
}

/** Splits a flight's entries into calls: by batch (script and slot), in arrival order, `maxGroup` at most. */
function callsOf<P, T>(entries: Entry<P, T>[], maxGroup: number): Entry<P, T>[][] {
  if (entries.length === 1) return [entries]
  const byBatch = new Map<string, Entry<P, T>[][]>()
  const calls: Entry<P, T>[][] = []
  for (const entry of entries) {
    let chunks = byBatch.get(entry.batch)
    if (chunks === undefined) {
      chunks = []
      byBatch.set(entry.batch, chunks)
    }
    let last = chunks[chunks.length - 1]
    if (last === undefined || last.length >= maxGroup) {
      last = []
      chunks.push(last)
      calls.push(last)
    }
    last.push(entry)
  }
  return calls
}
