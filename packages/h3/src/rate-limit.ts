import type { HttpRateLimitOptions, RateLimitResult } from '@ratewindow/core'
import {
  type FetchResponse,
  followedBody,
  type HttpDecision,
  HttpRateLimiter,
  INVALID_ADDRESS,
  type MiddlewareHandles,
  unlessInvalidAddress,
  withHandles,
} from '@ratewindow/core/adapter'
import type { H3Event } from 'h3'
import {
  ADDRESS_NAMES,
  addressSource,
  type DenialHandler,
  errorStatus,
  type H3AddressOptions,
  h3Binding,
  invalidAddressResponse,
  responseOf,
  statusOf,
} from './binding.js'
import { deferOf, type H3EventLike, setResponseHeaders } from './event.js'

/** What the middleware puts on `event.context`: `event.context.rateLimit` (undefined when skipped). */
export interface RateLimitContext {
  /** The rate limit decision for this request, set by `@ratewindow/h3`. */
  rateLimit?: RateLimitResult
}

/**
 * `rateLimit()` options: the shared middleware options, callbacks receiving the h3 event (`H3Event` of the h3
 * you installed, 1 or 2), and how the client address is found.
 */
export interface H3RateLimitOptions<E extends H3EventLike = H3Event>
  extends HttpRateLimitOptions<E, unknown>,
    H3AddressOptions<E> {
  /** Replaces the default 429 answer (not for a deny-listed client): return the response. */
  handler?: DenialHandler<E>
}

/**
 * The middleware: an h3 2 middleware (`app.use(limiter)`, `(event, next)`) and an h3 1 event handler (`app.use`,
 * Nitro's `server/middleware/`) at once, with handles on its counters.
 */
export type RateLimitMiddleware<E extends H3EventLike = H3Event> = ((
  event: E,
  next?: () => unknown,
) => Promise<unknown>) &
  MiddlewareHandles<E>

/**
 * Rate limits every request it sees: `app.use(rateLimit({ limit: 100, window: '1m' }))` on h3 2 or 1, or
 * `export default rateLimit({ … })` in Nitro's and Nuxt's `server/middleware/`. A refused request gets 429 with the
 * RateLimit headers, `Retry-After` and the body, and nothing after it runs; an admitted one gets the headers, and
 * the decision on `event.context.rateLimit`. Keyed by the connection's address (`trustProxy` behind proxies).
 */
export function rateLimit<E extends H3EventLike = H3Event>(
  options: H3RateLimitOptions<E> = {},
): RateLimitMiddleware<E> {
  const binding = h3Binding<E>(addressSource(options), options, 'rateLimit()')
  const engine = new HttpRateLimiter<E, unknown>(options, {
    ...binding,
    options: ['handler', ...ADDRESS_NAMES],
  })
  const tracks =
    engine.holdsSlots || options.skipFailedRequests === true || options.skipSuccessfulRequests === true

  async function deny(event: E, decision: HttpDecision): Promise<Response> {
    if (options.handler !== undefined && decision.result.source !== 'deny-list') {
      let response = await options.handler(event, decision.result)
      for (const name in decision.headers) {
        if (response.headers.has(name)) continue
        // A response whose headers cannot change (`Response.redirect`, a `fetch` answer) is copied first.
        if (!trySet(response.headers, name, decision.headers[name]!)) {
          response = new Response(response.body, response)
          response.headers.set(name, decision.headers[name]!)
        }
      }
      return response
    }
    const { contentType, payload } = await engine.body(event, decision)
    return new Response(payload, {
      status: decision.statusCode,
      headers: { ...decision.headers, 'Content-Type': contentType },
    })
  }

  async function rateLimitMiddleware(event: E, next?: () => unknown): Promise<unknown> {
    const decision = await unlessInvalidAddress(engine.decide(event), 'answered 500')
    if (decision === INVALID_ADDRESS) return invalidAddressResponse()
    if (decision === undefined) return next?.()
    // The client left before the decision: an empty answer, which nobody receives; nothing else runs for it.
    if (decision.gone) return new Response(null, { status: decision.statusCode })
    if (!decision.result.allowed) return deny(event, decision)
    ;(event.context as RateLimitContext).rateLimit = decision.result
    setResponseHeaders(event, decision.headers)
    engine.followSettle(decision, event)
    if (!tracks) return next?.()
    const response = responseOf(event)
    engine.track(response, decision, deferOf(event), event)
    // h3 1: the Node response is watched as it is sent; nothing waits here.
    if (response.finish === undefined) return undefined
    let status = 500
    /** A streamed answer: the slot is held until its body is sent. */
    let followed = false
    try {
      const body = await next?.()
      status = statusOf(event, body)
      const sent = sentAnswer(body, event.req?.method ?? 'GET', status, response as FetchResponse)
      followed = sent !== undefined
      return sent ?? body
    } catch (error) {
      status = errorStatus(error)
      throw error
    } finally {
      if (!followed) response.finish(status)
    }
  }
  // h3 1 recognizes an event handler by this flag (`isEventHandler`): no implicit conversion, no warning.
  Object.assign(rateLimitMiddleware, { __is_handler__: true })
  return withHandles(rateLimitMiddleware, engine)
}

/**
 * h3 2's streamed answer in place of `value`, read through, so that `tracked` finishes once it is sent (a slot held
 * that long: the handler's work goes on while it streams); undefined for an answer sent whole, or not sent at all
 * (a HEAD request's, whose body h3 drops unread: `tracked` finished at once). A streamed answer is a `Response`
 * with a body, a `ReadableStream`, a Node `Readable`, or h3's own `HTTPResponse` with either for its body (what
 * `iterable()`, `createEventStream()` and `new HTTPResponse(stream)` return).
 */
function sentAnswer(value: unknown, method: string, status: number, tracked: FetchResponse): unknown {
  if (value instanceof Response) {
    const followed = value.body === null ? undefined : sentBody(value.body, method, status, tracked)
    return followed === undefined ? undefined : new Response(followed as ReadableStream, value)
  }
  if (isH3Response(value)) {
    // Its body is a field h3 reads when it makes the response (h3 2.0.8); where it cannot be set, sent as it is.
    if (Object.getOwnPropertyDescriptor(value, 'body')?.writable !== true) return undefined
    const followed = sentBody(value.body, method, status, tracked)
    if (followed === undefined) return undefined
    value.body = followed
    return value
  }
  return sentBody(value, method, status, tracked)
}

/** `sentAnswer` for a body: a `ReadableStream` or a Node `Readable` followed; undefined for any other. */
function sentBody(body: unknown, method: string, status: number, tracked: FetchResponse): unknown {
  if (body instanceof ReadableStream) return followedBody(body, method, status, tracked)
  if (!isNodeReadable(body)) return undefined
  if (method === 'HEAD') {
    tracked.finish(status)
    return undefined
  }
  // Node's stream closes once it ended, failed, or was destroyed (the client left); one that ends without closing
  // (`autoDestroy: false`) ends.
  let over = false
  const end = () => {
    if (over) return
    over = true
    tracked.finish(body.errored ? 500 : status)
  }
  body.once('end', end)
  body.once('close', end)
  return body
}

const H3_RESPONSE = Symbol.for('h3.HTTPResponse')

/** h3 2's `HTTPResponse` (marked by h3 with this symbol on its prototype), which carries its body on `body`. */
function isH3Response(value: unknown): value is { body: unknown } {
  return (
    typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[H3_RESPONSE] === true
  )
}

/** What is read of a Node `Readable`, which h3 2 sends by piping it (no `node:stream` import: h3 runs on Workers). */
interface NodeReadable {
  readonly errored?: unknown
  pipe(destination: unknown): unknown
  once(event: 'end' | 'close', listener: () => void): unknown
}

function isNodeReadable(value: unknown): value is NodeReadable {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as NodeReadable).pipe === 'function' &&
    typeof (value as NodeReadable).once === 'function'
  )
}

/** Sets a header, or answers false where the headers are immutable. */
function trySet(headers: Headers, name: string, value: string): boolean {
  try {
    headers.set(name, value)
    return true
  } catch {
    return false
  }
}
