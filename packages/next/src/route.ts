import type { RateLimitResult } from '@ratewindow/core'
import { FetchResponse, followedBody } from '@ratewindow/core/adapter'
import {
  decideFor,
  denial,
  INVALID_ADDRESS,
  invalidAddressResponse,
  type NextRateLimitOptions,
  nextEngine,
  withHeaders,
} from './binding.js'
import { warnPerInstance } from './edge.js'
import { noteRouteFields } from './proxied.js'

/** The decision of each request a `withRateLimit` handler admitted, for `rateLimitOf`. */
const decisions = new WeakMap<object, RateLimitResult>()

/**
 * The rate limit decision of `request` inside a `withRateLimit` handler (with `settle` for reserve-then-settle);
 * undefined when the request was skipped or outside such a handler.
 */
export function rateLimitOf(request: Request): RateLimitResult | undefined {
  return decisions.get(request)
}

/** A route handler as `withRateLimit` returns it, with handles on its counters. */
export type RateLimitedHandler<Req extends Request, Context> = ((
  request: Req,
  context: Context,
) => Promise<Response>) & {
  /** Forgets `key` in every counter of this limiter. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Gives up the counters, and closes the memory store made for itself (a `store` you passed stays open). */
  close(): void
}

/**
 * Limits a route handler (`export const POST = withRateLimit(handler, { limit: 10, window: '1m', trustProxy: 1 })`):
 * a refused request gets 429 with the RateLimit headers, `Retry-After` and the body, and the handler does not
 * run; an admitted one runs it, and its response gets the RateLimit headers. The handler reads the decision with
 * `rateLimitOf(request)`. Every option works here, `skipFailedRequests`, `concurrency` and `delay` included
 * (judged by the handler's response, once it returned; `concurrency` holds its slot until the response's body
 * is sent). Build it once, at module level.
 */
export function withRateLimit<Req extends Request, Context = unknown>(
  handler: (request: Req, context: Context) => Response | Promise<Response>,
  options: NextRateLimitOptions<Req> = {},
): RateLimitedHandler<Req, Context> {
  if (typeof handler !== 'function')
    throw new TypeError('withRateLimit(handler, options): `handler` must be the route handler function.')
  const engine = nextEngine<Req>(options, 'withRateLimit()')
  const tracks =
    engine.holdsSlots || options.skipFailedRequests === true || options.skipSuccessfulRequests === true

  async function rateLimitedHandler(request: Req, context: Context): Promise<Response> {
    warnPerInstance(options)
    const decision = await decideFor(engine, request)
    if (decision === INVALID_ADDRESS) return invalidAddressResponse()
    if (decision === undefined) return handler(request, context)
    if (decision.gone) return new Response(null, { status: decision.statusCode })
    noteRouteFields(request, decision.headers, 'withRateLimit()')
    if (!decision.result.allowed) return denial(engine, request, decision, options.handler)
    decisions.set(request, decision.result)
    // `settle` in the handler rewrites these before they are added to its response.
    const headers = new Headers(decision.headers)
    engine.followSettle(decision, headers)
    const tracked = tracks ? new FetchResponse() : undefined
    if (tracked !== undefined) engine.track(tracked, decision, undefined, request)
    let response: Response | undefined
    try {
      response = await handler(request, context)
    } finally {
      if (response === undefined || !engine.holdsSlots) tracked?.finish(response?.status ?? 500)
    }
    if (tracked !== undefined && engine.holdsSlots) response = finishedWhenSent(response, request, tracked)
    return withHeaders(response, Object.fromEntries(headers))
  }
  return Object.assign(rateLimitedHandler, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}

/**
 * `response`, whose sending `tracked` follows: it finishes (the slot is given back) once the body ended, failed
 * (judged as 500) or was cancelled (its client left: Next.js cancels the body), at once when there is no body to
 * send (none, or a HEAD request's, which Next.js never reads).
 */
function finishedWhenSent(response: Response, request: Request, tracked: FetchResponse): Response {
  const body = followedBody(response.body, request.method, response.status, tracked)
  return body === undefined ? response : new Response(body, response)
}
