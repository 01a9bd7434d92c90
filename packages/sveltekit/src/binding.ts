import type { RateLimitResult } from '@ratewindow/core'
import {
  type ClosableSocket,
  FetchResponse,
  type FrameworkBinding,
  followedBody,
  type HttpDecision,
  type HttpRateLimiter,
  INVALID_ADDRESS,
  socketClosed,
  trustsEveryAddress,
  unlessInvalidAddress,
} from '@ratewindow/core/adapter'
import type { RequestEvent } from '@sveltejs/kit'
import { ADDRESS_NAMES, forwardedEntries, type KitAddressOptions, platformAddress } from './address.js'

/**
 * What the engines of `rateLimit()`, `withRateLimit()`, `rateLimitAction()` and `slowDown()` know of SvelteKit:
 * the address `clientIp` finds, the client leaving, the route. `names` are the entry point's own option names.
 */
export function kitBinding<E extends RequestEvent>(
  clientIp: (event: E) => string | undefined,
  options: KitAddressOptions<E>,
  names: readonly string[],
  where: string,
): FrameworkBinding<E> {
  const { trustProxy } = options
  return {
    name: 'SvelteKit',
    clientIp,
    // adapter-node's socket (its `platform.req`); elsewhere the request's abort signal.
    onClose: (event, listener) => {
      const socket = nodeSocketOf(event)
      if (socket !== undefined) return socketClosed(socket, listener)
      const signal = event.request.signal
      if (signal.aborted) {
        queueMicrotask(listener)
        return () => {}
      }
      signal.addEventListener('abort', listener, { once: true })
      return () => signal.removeEventListener('abort', listener)
    },
    gone: (event) => event.request.signal.aborted || nodeSocketOf(event)?.destroyed === true,
    // A forwarding header the key does not come from: neither `trustProxy`, `clientIp`, nor the adapter (whose
    // address, read from the header with adapter-node's ADDRESS_HEADER, is then one of its entries).
    untrustedForwardedFor: (event) => {
      const entries = forwardedEntries(event)
      if (entries.length === 0) return undefined
      if (trustProxy !== undefined || options.clientIp !== undefined) return false
      const address = platformAddress(event)
      return address === undefined || !entries.includes(address)
    },
    trustProxyHint: `set adapter-node's ADDRESS_HEADER=x-forwarded-for and XFF_DEPTH (the number of proxies), or pass \`trustProxy\` to ${where}`,
    permissiveTrustProxy: () => trustsEveryAddress(trustProxy),
    permissiveTrustProxyHint:
      'Set `trustProxy` to the number of proxies in front of the app (e.g. 1) or their addresses, not a /0 network.',
    route: (event) => event.route.id ?? undefined,
    options: [...names, ...ADDRESS_NAMES],
    // After `settle`: the prepared headers follow, until the response is made.
    writeHeaders: (target, headers) => {
      for (const name in headers) (target as Headers).set(name, headers[name]!)
    },
  }
}

/** adapter-node's request socket (`event.platform.req.socket`); undefined on other adapters. */
function nodeSocketOf(event: RequestEvent): ClosableSocket | undefined {
  const platform = event.platform as { req?: { socket?: Partial<ClosableSocket> | null } } | undefined
  const socket = platform?.req?.socket
  return typeof socket?.once === 'function' ? (socket as ClosableSocket) : undefined
}

export { INVALID_ADDRESS }

/** How the entry points answer a request whose client address is not an IP address, for core's warning. */
const INVALID_ADDRESS_ANSWER = 'answered 500 (a form action: refused)'

/**
 * Whether `event` is SvelteKit prerendering a page at build time (`vite build`), where no client sends the request:
 * the entry points let it through uncounted (a 429 or a 500 there would fail the build). SvelteKit says so only
 * through `getClientAddress()`, which throws then.
 */
export function prerendering(event: RequestEvent): boolean {
  try {
    event.getClientAddress()
    return false
  } catch (error) {
    return error instanceof Error && /prerender/i.test(error.message)
  }
}

/**
 * `engine.decide(event)`; undefined (skipped) while prerendering; `INVALID_ADDRESS` for a client address that is
 * not an IP address (a forwarded `unknown`, a request without adapter-node's ADDRESS_HEADER): answered 500 by the
 * entry points, counted nowhere, with one warning instead of a stack trace per request.
 */
export async function decideFor<E extends RequestEvent>(
  engine: HttpRateLimiter<E, Response>,
  event: E,
): Promise<HttpDecision | undefined | typeof INVALID_ADDRESS> {
  if (prerendering(event)) return undefined
  return unlessInvalidAddress(engine.decide(event), INVALID_ADDRESS_ANSWER)
}

/**
 * The route's answer in place of `response` when it is still to be sent (a streamed body): `tracked` finishes once
 * it is sent or its client left, so that an in-flight slot is held while the body streams; else `response`, with
 * `tracked` finished at once.
 */
export function sentResponse(response: Response, request: Request, tracked: FetchResponse): Response {
  const body = followedBody(response.body, request.method, response.status, tracked)
  return body === undefined ? response : new Response(body, response)
}

/** The answer to a request whose client address is not an address: 500, with no detail for the client. */
export const invalidAddressResponse = (): Response =>
  new Response('Internal Server Error', { status: 500, headers: { 'Content-Type': 'text/plain' } })

/** Replaces the default 429 answer (not for a deny-listed client). */
export type DenialHandler<E> = (event: E, result: RateLimitResult) => Response | Promise<Response>

/** The answer to a refused request: the `handler` option's, or the engine's body, with the decision's headers. */
export async function denial<E extends RequestEvent>(
  engine: HttpRateLimiter<E, Response>,
  event: E,
  decision: HttpDecision,
  handler: DenialHandler<E> | undefined,
): Promise<Response> {
  if (handler !== undefined && decision.result.source !== 'deny-list')
    return withHeaders(await handler(event, decision.result), decision.headers)
  const { contentType, payload } = await engine.body(event, decision)
  return new Response(payload, {
    status: decision.statusCode,
    headers: { ...decision.headers, 'Content-Type': contentType },
  })
}

/**
 * `response` with `headers` added where it has none of its own (an endpoint's limiter set them first); a response
 * whose headers cannot change (a `fetch` answer passed through) is copied first.
 */
export function withHeaders(response: Response, headers: Record<string, string>): Response {
  let target = response
  for (const name in headers) {
    if (target.headers.has(name)) continue
    try {
      target.headers.set(name, headers[name]!)
    } catch {
      target = new Response(target.body, target)
      target.headers.set(name, headers[name]!)
    }
  }
  return target
}

/**
 * The response the engine judges (core's `FetchResponse`): finished when the route's `Response` is made, closed
 * then or when the client leaves first.
 */
export const routeResponse = (event: RequestEvent): FetchResponse =>
  new FetchResponse({ signal: event.request.signal })

/** The `Response` each request's route made, for a two-parameter `requestWasSuccessful`. */
const responses = new WeakMap<object, Response>()

/** Remembers the `Response` made for `event`, for `requestWasSuccessful(event, response)`. */
export const noteResponse = (event: object, response: Response): void => {
  responses.set(event, response)
}

/**
 * A two-parameter `requestWasSuccessful` gets `(event, response)`: the `Response` the route made (read when the
 * request is judged, once it is made). For every entry point.
 */
export function withRouteResponse<O extends { requestWasSuccessful?: unknown }>(options: O): O {
  const check = options.requestWasSuccessful
  if (typeof check !== 'function' || check.length < 2) return options
  const byResponse = check as (event: RequestEvent, response: Response | undefined) => unknown
  return {
    ...options,
    requestWasSuccessful: (event: RequestEvent, _tracked: unknown) => byResponse(event, responses.get(event)),
  }
}
