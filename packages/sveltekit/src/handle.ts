import type { HttpRateLimitOptions, RateLimitResult } from '@ratewindow/core'
import { HttpRateLimiter, type MiddlewareHandles, withHandles } from '@ratewindow/core/adapter'
import type { Handle, RequestEvent } from '@sveltejs/kit'
import { addressSource, type KitAddressOptions } from './address.js'
import {
  type DenialHandler,
  decideFor,
  denial,
  INVALID_ADDRESS,
  invalidAddressResponse,
  kitBinding,
  noteResponse,
  routeResponse,
  sentResponse,
  withHeaders,
  withRouteResponse,
} from './binding.js'

/**
 * What the entry points put on `event.locals`: declare it in your `src/app.d.ts` (`interface Locals extends
 * RateLimitLocals {}` inside `declare global { namespace App { … } }`) to type `event.locals.rateLimit`.
 */
export interface RateLimitLocals {
  /** The rate limit decision for this request; undefined when it was skipped. */
  rateLimit?: RateLimitResult
}

/**
 * Options of `rateLimit()`, `withRateLimit()` and `rateLimitAction()`: the shared middleware options, callbacks
 * receiving the `RequestEvent`; `requestWasSuccessful` takes `(statusCode)`, or `(event, response)` when it declares
 * two parameters (the `Response` the route made).
 */
export interface KitRateLimitOptions<E extends RequestEvent = RequestEvent>
  extends HttpRateLimitOptions<E, Response>,
    KitAddressOptions<E> {
  /** Replaces the default 429 answer (not for a deny-listed client): return the response. */
  handler?: DenialHandler<E>
}

/** The `handle` hook, with handles on its counters: `resetKey`, `reset`, `operator`, `close`. */
export type RateLimitHandle = Handle & MiddlewareHandles<RequestEvent>

/** The engine of one entry point: options checked here, at construction. */
export function kitEngine<E extends RequestEvent>(
  options: KitRateLimitOptions<E>,
  where: string,
): HttpRateLimiter<E, Response> {
  const binding = kitBinding<E>(addressSource(options), options, ['handler'], where)
  return new HttpRateLimiter<E, Response>(withRouteResponse(options), binding, { where })
}

/** Whether the engine follows the response: refunds by outcome, or an in-flight slot to give back. */
export const tracksResponse = (
  engine: { readonly holdsSlots: boolean },
  options: { skipFailedRequests?: boolean; skipSuccessfulRequests?: boolean },
): boolean =>
  engine.holdsSlots || options.skipFailedRequests === true || options.skipSuccessfulRequests === true

/**
 * The answer of a request limited by `engine` (the handle's and an endpoint's alike): skipped, refused, or `run` (the
 * route, or the endpoint's handler) with the decision on `event.locals.rateLimit` and the RateLimit headers added to
 * its response, which is judged for a refund and frees the in-flight slot once made (`tracks`).
 */
export async function limitedResponse<E extends RequestEvent>(
  engine: HttpRateLimiter<E, Response>,
  tracks: boolean,
  event: E,
  handler: DenialHandler<E> | undefined,
  run: () => Response | Promise<Response>,
): Promise<Response> {
  const decision = await decideFor(engine, event)
  if (decision === INVALID_ADDRESS) return invalidAddressResponse()
  if (decision === undefined) return run()
  // The client left before the decision: an empty answer, which nobody receives; the route does not run.
  if (decision.gone) return new Response(null, { status: decision.statusCode })
  if (!decision.result.allowed) return denial(engine, event, decision, handler)
  ;(event.locals as RateLimitLocals).rateLimit = decision.result
  // `settle` in the route rewrites these before they are added to its response.
  const headers = new Headers(decision.headers)
  engine.followSettle(decision, headers)
  const tracked = tracks ? routeResponse(event) : undefined
  if (tracked !== undefined) engine.track(tracked, decision, undefined, event)
  let response: Response | undefined
  try {
    response = await run()
    noteResponse(event, response)
  } finally {
    if (response === undefined || !engine.holdsSlots) tracked?.finish(response?.status ?? 500)
  }
  if (tracked !== undefined && engine.holdsSlots) response = sentResponse(response, event.request, tracked)
  return withHeaders(response, Object.fromEntries(headers))
}

/**
 * The `handle` hook of `src/hooks.server.ts`: `export const handle = rateLimit({ limit: 100, window: '1m' })`, or
 * one step of `sequence(...)`. A refused request gets 429 with the RateLimit headers, `Retry-After` and the body,
 * and its route does not run; an admitted one's response gets the RateLimit headers, and `event.locals.rateLimit`
 * holds the decision. Keyed by `event.getClientAddress()`. Build it once, at module level.
 */
export function rateLimit(options: KitRateLimitOptions = {}): RateLimitHandle {
  const engine = kitEngine(options, 'rateLimit()')
  const tracks = tracksResponse(engine, options)

  // A sub-request (`event.fetch` of a route of this app, in a `load`) is part of a request this hook already
  // counted: counted again, a page that loads one would cost its client two.
  const rateLimitHandle: Handle = ({ event, resolve }) =>
    event.isSubRequest
      ? resolve(event)
      : limitedResponse(engine, tracks, event, options.handler, () => resolve(event))
  return withHandles(rateLimitHandle, engine)
}
