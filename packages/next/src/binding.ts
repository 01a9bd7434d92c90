import { type HttpRateLimitOptions, ipKey, RateLimitError, type RateLimitResult } from '@ratewindow/core'
import {
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  INVALID_ADDRESS,
  unlessInvalidAddress,
} from '@ratewindow/core/adapter'
import {
  ADDRESS_OPTIONS,
  addressSource,
  type HeadersCarrier,
  invalidOption,
  type NextAddressOptions,
} from './address.js'

/** A request as the engine reads it: headers, and the abort signal where there is one (not for server actions). */
export interface NextRequestLike extends HeadersCarrier {
  readonly signal?: AbortSignal
}

/**
 * Options of every entry point: the shared middleware options (`limit`, `window`, `store`, `key`, …), with
 * callbacks that receive the request, and how the client address is found. Not `overrides`: no entry point hands
 * out an operator handle yet.
 */
export interface NextRateLimitOptions<Req extends NextRequestLike = Request>
  extends Omit<HttpRateLimitOptions<Req, Response>, 'overrides' | 'key'>,
    NextAddressOptions<Req> {
  /**
   * The client's key, from something the server verified (the user of a verified session, an account found by
   * its API key); `undefined` keys the request by its client address instead (`trustProxy` or `clientIp`), so
   * that callers without one never share a bucket. @default the client address
   * @example key: async (request) => { const user = await verifiedUser(request); return user && `user:${user.id}` }
   */
  key?: (request: Req) => string | undefined | Promise<string | undefined>
  /** Replaces the default 429 answer (not for a deny-listed client): return the response. */
  handler?: (request: Req, result: RateLimitResult) => Response | Promise<Response>
}

/** Options that act on the response, which middleware, proxy and server actions never see. */
export const RESPONSE_OPTIONS = [
  'skipFailedRequests',
  'skipSuccessfulRequests',
  'concurrency',
  'delay',
] as const
/** Those options, and `requestWasSuccessful`, which only they read: left out of the types where they are refused. */
export type ResponseOption = (typeof RESPONSE_OPTIONS)[number] | 'requestWasSuccessful'

/**
 * Refuses the options that need the response: Next.js runs the route after middleware (or proxy) has returned,
 * and a server action has no response of its own.
 */
export function refuseResponseOptions(options: object, where: string): void {
  for (const name of RESPONSE_OPTIONS) {
    const value = (options as Record<string, unknown>)[name]
    if (value === undefined || value === false) continue
    throw invalidOption(
      name,
      `\`${name}\` needs the route's response, which ${where} never sees. Limit the route handler with ` +
        '`withRateLimit(handler, options)`, where it works (docs/next.md#route-handlers).',
    )
  }
}

const TRUST_HINT =
  'pass `trustProxy` (the number of proxies in front of the app, 1 on Vercel, or their addresses)'

/** The engine of one entry point: options checked here, at construction. */
export function nextEngine<Req extends NextRequestLike>(
  options: NextRateLimitOptions<Req>,
  where: string,
): HttpRateLimiter<Req, Response> {
  const clientIp = addressSource(options, options.key !== undefined, where)
  const binding: FrameworkBinding<Req> = {
    name: 'Next.js',
    clientIp: (request) => clientIp?.(request),
    // X-Forwarded-For is on every request `next start` serves (it writes the connection's address when a request
    // comes without one), so it says nothing about a proxy: an address is required at construction instead.
    untrustedForwardedFor: () => false,
    trustProxyHint: TRUST_HINT,
    onClose: (request, listener) => {
      const signal = request.signal
      if (signal === undefined) return () => {}
      if (signal.aborted) {
        queueMicrotask(listener)
        return () => {}
      }
      signal.addEventListener('abort', listener, { once: true })
      return () => signal.removeEventListener('abort', listener)
    },
    gone: (request) => request.signal?.aborted === true,
    options: ['handler', ...ADDRESS_OPTIONS],
    // After `settle`: the headers prepared for the route handler's response follow the settled result.
    writeHeaders: (target, headers) => {
      for (const name in headers) (target as Headers).set(name, headers[name]!)
    },
  }
  const { key } = options
  const engineOptions =
    typeof key === 'function'
      ? { ...options, key: keyOrAddress(key, clientIp, options.ipv6Subnet, where) }
      : options
  return new HttpRateLimiter<Req, Response>(engineOptions as HttpRateLimitOptions<Req, Response>, binding, {
    where,
  })
}

/** `key`'s answer, or the client address's key where it answers `undefined`. */
function keyOrAddress<Req>(
  key: (request: Req) => string | undefined | Promise<string | undefined>,
  clientIp: ((request: Req) => string | undefined) | undefined,
  ipv6Subnet: number | false | undefined,
  where: string,
): (request: Req) => string | Promise<string> {
  const byAddress = (request: Req, chosen: string | undefined): string => {
    if (chosen !== undefined) return chosen
    if (clientIp === undefined)
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_KEY',
        `${where}: \`key\` returned undefined, which keys the request by its client address, but no address is configured: pass \`trustProxy\` (or \`clientIp\`) as well (docs/next.md#the-client-address).`,
        { option: 'key' },
      )
    return ipKey(clientIp(request) ?? '', { ipv6Subnet })
  }
  return (request) => {
    const chosen = key(request)
    return chosen instanceof Promise
      ? chosen.then((each) => byAddress(request, each))
      : byAddress(request, chosen)
  }
}

export { INVALID_ADDRESS }

/**
 * `engine.decide(request)`, or `INVALID_ADDRESS` for a client address that is not an IP address: the entry
 * points answer it themselves (500; a server action: refused), counting nothing, with one warning (core's
 * `unlessInvalidAddress`), where a thrown error would print a stack trace per request.
 */
export async function decideFor<Req extends NextRequestLike>(
  engine: HttpRateLimiter<Req, Response>,
  request: Req,
): Promise<HttpDecision | undefined | typeof INVALID_ADDRESS> {
  return unlessInvalidAddress(engine.decide(request), 'answered 500 (a server action: refused)')
}

/** The answer to a request whose client address is not an address: 500, with no detail for the client. */
export const invalidAddressResponse = (): Response =>
  new Response('Internal Server Error', { status: 500, headers: { 'Content-Type': 'text/plain' } })

/** The answer to a refused request: the `handler` option's, or the engine's body, with the decision's headers. */
export async function denial<Req extends NextRequestLike>(
  engine: HttpRateLimiter<Req, Response>,
  request: Req,
  decision: HttpDecision,
  handler: NextRateLimitOptions<Req>['handler'],
): Promise<Response> {
  if (handler !== undefined && decision.result.source !== 'deny-list') {
    return withHeaders(await handler(request, decision.result), decision.headers)
  }
  const { contentType, payload } = await engine.body(request, decision)
  return new Response(payload, {
    status: decision.statusCode,
    headers: { ...decision.headers, 'Content-Type': contentType },
  })
}

/**
 * `response` with `headers` added where it has none of its own; a response whose headers cannot change
 * (`Response.redirect`, a `fetch` answer) is copied first.
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
