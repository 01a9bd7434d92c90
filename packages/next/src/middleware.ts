import { type NextRequest, NextResponse } from 'next/server.js'
import {
  decideFor,
  denial,
  INVALID_ADDRESS,
  invalidAddressResponse,
  type NextRateLimitOptions,
  nextEngine,
  type ResponseOption,
  refuseResponseOptions,
} from './binding.js'
import { warnPerInstance } from './edge.js'
import { forwardedRequestHeaders } from './proxied.js'
import { warnIfMiddlewareSkippable } from './version.js'

/**
 * Options of `rateLimit()` in `middleware.ts` or `proxy.ts`. The options that need the route's response
 * (`skipFailedRequests`, `skipSuccessfulRequests`, `concurrency`, `delay`) are `withRateLimit`'s only.
 */
export type NextMiddlewareOptions = Omit<NextRateLimitOptions<NextRequest>, ResponseOption>

/** The middleware (or proxy) function, with handles on its counters. */
export interface RateLimitMiddleware {
  /** Answers 429 (with the headers, `Retry-After` and the body), or lets the request on with the headers added. */
  (request: NextRequest): Promise<Response>
  /** Forgets `key` in every counter of this limiter (e.g. after a successful login). Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Gives up the counters, and closes the memory store made for itself (a `store` you passed stays open). */
  close(): void
}

/**
 * Limits requests in `middleware.ts` (Next 15 and 16, Edge or Node.js runtime) or `proxy.ts` (Next 16): export
 * it as `middleware` or `proxy`, and choose the routes with `config.matcher`. A refused request gets 429 with
 * the RateLimit headers, `Retry-After` and the body; an admitted one goes on (`NextResponse.next`) with the
 * RateLimit headers on its response, and its decision passed on to the route in the request header
 * `x-ratewindow-proxy` (for a route limiter to tell that both send fields). Options are checked here, at
 * construction; on a Next.js whose middleware a request can skip (before 15.2.3), a warning says so.
 */
export function rateLimit(options: NextMiddlewareOptions = {}): RateLimitMiddleware {
  refuseResponseOptions(options, 'middleware (or proxy)')
  const engine = nextEngine<NextRequest>(options, 'rateLimit()')
  void warnIfMiddlewareSkippable()
  const { handler } = options

  async function rateLimitMiddleware(request: NextRequest): Promise<Response> {
    warnPerInstance(options)
    const decision = await decideFor(engine, request)
    if (decision === INVALID_ADDRESS) return invalidAddressResponse()
    if (decision === undefined) return goOn(request, undefined)
    // The client left before the decision: an empty answer, which nobody receives.
    if (decision.gone) return new Response(null, { status: decision.statusCode })
    if (!decision.result.allowed) return denial(engine, request, decision, handler)
    return goOn(request, decision.headers)
  }
  return Object.assign(rateLimitMiddleware, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}

/** Lets the request on with `headers` on its response, and passed on to the route (never as the client wrote them). */
function goOn(request: NextRequest, headers: Record<string, string> | undefined): Response {
  const forwarded = forwardedRequestHeaders(request, headers)
  if (forwarded === undefined) return NextResponse.next(headers === undefined ? undefined : { headers })
  return NextResponse.next({ ...(headers === undefined ? {} : { headers }), request: { headers: forwarded } })
}
