/**
 * Middleware (or proxy.ts) and a route limiter on one request. Next.js sets the middleware's response headers on
 * the response before the route runs, and adds a route's header only where the middleware set none: the
 * middleware's RateLimit fields win over the route's, and a route's 429 goes out with the proxy's
 * `RateLimit-Remaining` beside the route's `Retry-After`. Nothing the route returns can take them off, and the
 * middleware cannot know which routes have a limiter of their own. So the middleware passes its decision on to the
 * route as a request header, and a route limiter that finds it while both send fields warns once
 * (`RATEWINDOW_MIXED_HEADERS`), naming the fix: `headers: false` on the proxy's limiter for those routes.
 */
import { emitWarning } from '@ratewindow/core/support'
import type { HeadersCarrier } from './address.js'

/** The request header that carries the middleware's decision to the route: the RateLimit fields it sends. */
export const PROXY_DECISION_HEADER = 'x-ratewindow-proxy'

/**
 * The request headers the route sees: the client's, with the middleware's fields in `PROXY_DECISION_HEADER` (or
 * without that header at all, when `fields` is undefined: a client cannot write it). Undefined when nothing
 * changes (no fields to pass on, and the client sent no such header).
 */
export function forwardedRequestHeaders(
  request: HeadersCarrier & { headers: Headers },
  fields: Record<string, string> | undefined,
): Headers | undefined {
  const passed = fields === undefined ? undefined : rateLimitFields(fields)
  if (passed === undefined && !request.headers.has(PROXY_DECISION_HEADER)) return undefined
  const headers = new Headers(request.headers)
  if (passed === undefined) headers.delete(PROXY_DECISION_HEADER)
  else headers.set(PROXY_DECISION_HEADER, JSON.stringify(passed))
  return headers
}

let warned = false

/**
 * Called by a route limiter with the fields it sends: warns once when the middleware passed on fields of its own
 * for this request, which Next.js will set over the route's.
 */
export function noteRouteFields(
  request: HeadersCarrier,
  fields: Record<string, string>,
  where: string,
): void {
  if (warned || rateLimitFields(fields) === undefined) return
  const proxied = request.headers.get(PROXY_DECISION_HEADER)
  if (proxied === null || proxied === '') return
  warned = true
  emitWarning(
    `Middleware (or proxy.ts) and ${where} both limited this request, and both send RateLimit fields: Next.js ` +
      "sets the middleware's fields on the response before the route runs and keeps them, so the response " +
      "states the middleware's quota beside the route's (a 429 of the route with the middleware's " +
      "`RateLimit-Remaining`, and the route's `Retry-After`). Give the middleware's limiter `headers: false` for the " +
      'routes that have a limiter of their own (docs/next.md#middleware-and-a-route-limiter-on-one-request).',
    'RATEWINDOW_MIXED_HEADERS',
  )
}

/** The RateLimit fields among `headers` (`RateLimit*`, `X-RateLimit-*`); undefined when there are none. */
function rateLimitFields(headers: Record<string, string>): Record<string, string> | undefined {
  let fields: Record<string, string> | undefined
  for (const name in headers) {
    if (!/^(x-)?ratelimit/i.test(name)) continue
    fields ??= {}
    fields[name] = headers[name]!
  }
  return fields
}
