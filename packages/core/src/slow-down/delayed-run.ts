/**
 * Running a delayed request of `slowDown()` once its delay ends, unless its client leaves first; a request whose
 * connection is stalled when its delay ends is refused then.
 */
import type { Defer, FrameworkBinding, TrackedResponse } from '../http/binding.js'
import type { HttpDecision } from '../http/decision.js'
import type { WaitingPlaces } from '../http/wait-room.js'
import type { DelayQueue } from '../time/delay-queue.js'
import { refusalAfter, type SlowDownDecision, type SlowDownInfo, type SlowDownRefusal } from './decision.js'

/**
 * How long a request whose delay ended on a stalled connection waits for Node to read that connection again before
 * it is answered 429, and how often it looks. A slow request at the head of a pipelined connection stalls the
 * answers behind it for as long as it runs: answering at once would refuse some of an honest pipelining client's
 * requests, and another client's request on a shared connection.
 */
const STALL_GRACE_MS = 5_000
const STALL_CHECK_MS = 50

export class DelayedRun<Req> {
  readonly #binding: FrameworkBinding<Req>
  readonly #queue: DelayQueue
  readonly #places: WaitingPlaces
  /** A request dropped before its handler ran (its client left, or its connection stalled). */
  readonly #dropped: (decision: HttpDecision, defer: Defer | undefined) => void

  constructor(
    binding: FrameworkBinding<Req>,
    queue: DelayQueue,
    places: WaitingPlaces,
    dropped: (decision: HttpDecision, defer: Defer | undefined) => void,
  ) {
    this.#binding = binding
    this.#queue = queue
    this.#places = places
    this.#dropped = dropped
  }

  /**
   * Runs `proceed` after the delay of `decided` (`state.ran` set then), and gives its place back; see
   * `SlowDownEngine.proceed`.
   */
  start(
    decided: SlowDownDecision<Req>,
    state: { ran: boolean },
    response: TrackedResponse,
    proceed: (refusal?: SlowDownRefusal) => void,
    abandon: (() => void) | undefined,
    defer: Defer | undefined,
  ): void {
    const { info, decision } = decided
    const key = decision.result.key
    // A refused decision holds no place (an adapter that predates `refusal` still delays it, unbounded).
    const leave = decided.refusal === undefined ? () => this.#places.leave(key) : () => {}
    if (response.destroyed === true) {
      leave()
      this.#left(decision, abandon, defer)
      return
    }
    let stop: (() => void) | undefined
    let placed = true
    // The delay ends; on a stalled connection, the request waits for Node to read it again (`STALL_CHECK_MS`
    // apart), at most `STALL_GRACE_MS`: the queue of answers ahead of it drains when a slow request at its head
    // is answered (an honest pipelining client, or another client's request on a shared connection).
    const end = (stalledFor: number) => {
      if (placed) {
        placed = false
        leave()
      }
      if (this.#stalledConnection(decided.request)) {
        if (stalledFor < STALL_GRACE_MS) {
          entry = this.#queue.add(STALL_CHECK_MS, () => end(stalledFor + STALL_CHECK_MS))
          return
        }
        stop?.()
        this.#stalled(decision, info, proceed, defer)
        return
      }
      stop?.()
      state.ran = true
      proceed()
    }
    let entry = this.#queue.add(info.delay, () => end(0))
    stop = this.#onClose(decided.request, response, () => {
      if (!this.#queue.cancel(entry)) return
      stop?.()
      if (placed) {
        placed = false
        leave()
      }
      this.#left(decision, abandon, defer)
    })
  }

  /**
   * Calls `gone` when the client of `request` disconnects: the binding's `onClose` (a Node socket's `close`,
   * which comes for every request pipelined on the connection, where a queued response emits no `close`), else
   * `response`'s `close`. Answers how to stop listening.
   */
  #onClose(request: Req, response: TrackedResponse, gone: () => void): (() => void) | undefined {
    const { onClose } = this.#binding
    if (onClose !== undefined) return onClose(request, gone)
    response.once('close', gone)
    return undefined
  }

  /** The client left while delayed: the handler never ran; with `skipFailedRequests`, its count is taken back. */
  #left(decision: HttpDecision, abandon: (() => void) | undefined, defer: Defer | undefined): void {
    this.#dropped(decision, defer)
    abandon?.()
  }

  /** The binding's `stalled`; a binding that throws (in a timer: nothing would catch it) counts as not stalled. */
  #stalledConnection(request: Req): boolean {
    try {
      return this.#binding.stalled?.(request) === true
    } catch {
      return false
    }
  }

  /**
   * The delay ended on a connection stalled for `STALL_GRACE_MS` since: whether the client is still there cannot be
   * known, so nothing runs for it; it is answered as past the bounds. The handler never ran: with `skipFailedRequests`, its count is
   * taken back.
   */
  #stalled(
    decision: HttpDecision,
    info: SlowDownInfo,
    proceed: (refusal?: SlowDownRefusal) => void,
    defer: Defer | undefined,
  ): void {
    this.#dropped(decision, defer)
    proceed(refusalAfter(info.delay))
  }
}
