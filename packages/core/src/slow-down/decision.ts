/** What `slowDown()` decides for a request, in the adapters' terms: its info, its decision, or its refusal. */
import { tooManyRequestsBody } from '../http/body.js'
import type { HttpDecision } from '../http/decision.js'
import { toSeconds } from '../http/headers.js'

/** What a slowed-down request carries (`req.slowDown` in Express): express-slow-down's fields. */
export interface SlowDownInfo {
  /** `delayAfter` for this request: the requests of a window that go at full speed. */
  limit: number
  /** Requests of this client in the current window, this one included. */
  used: number
  /** Requests left before delays start: `max(0, limit - used)`. */
  remaining: number
  /** When the window ends and the count starts again; undefined when the store could not count. */
  resetTime: Date | undefined
  /** The delay imposed on this request, ms (0: none). */
  delay: number
  /** The client's key. */
  key: string
}

/** What `decide` found for a request: its info (to put on the request) and how long it waits. */
export interface SlowDownDecision<Req = unknown> {
  info: SlowDownInfo
  /** The counting decision behind it (what `skipFailedRequests` gives back). */
  decision: HttpDecision
  /** The request decided for: `proceed` drops it when its client disconnects (the binding's `onClose`). */
  request: Req
  /**
   * Set when the request is refused instead of delayed: `maxPerKey` or `maxWaiting` delayed requests wait already.
   * The adapter answers it as it stands and runs nothing more for the request (no `proceed`).
   */
  refusal?: SlowDownRefusal
  /**
   * Set when the client left before the request was counted: nothing was counted, and `refusal` is set so that
   * the adapter answers (a closed connection) and runs nothing more.
   */
  gone?: true
}

/** The answer to a request refused past the bounds on delayed requests: a 429 with the adapters' default body. */
export interface SlowDownRefusal {
  statusCode: 429
  /** `Retry-After`: the delay the request would have waited, in seconds (rounded up). */
  headers: Record<string, string>
  contentType: string
  payload: string
}

/** The answer to a request past the bounds: 429, `Retry-After` the delay it would have waited. */
export function refusalAfter(delayMs: number): SlowDownRefusal {
  const { contentType, payload } = tooManyRequestsBody(delayMs)
  return { statusCode: 429, headers: { 'Retry-After': String(toSeconds(delayMs)) }, contentType, payload }
}
