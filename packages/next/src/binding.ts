import type { HttpRateLimitOptions, RateLimitResult } from '@ratewindow/core'
import { type FrameworkBinding, type HttpDecision, HttpRateLimiter } from '@ratewindow/core/adapter'
import { emitWarning } from '@ratewindow/core/support'
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
  extends Omit<HttpRateLimitOptions<Req, Response>, 'overrides'>,
    NextAddressOptions<Req> {
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
  return new HttpRateLimiter<Req, Response>(options, binding, { where })
}

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

declare const EdgeRuntime: unknown
let warnedPerInstance = false

/**
 * On the Edge runtime, a limiter given no `store` counts in one Edge instance: warned once, at the first request
 * (like the default MemoryStore on Cloudflare Workers), not at module load.
 */
export function warnPerInstance(options: { store?: unknown }): void {
  if (warnedPerInstance || options.store !== undefined || typeof EdgeRuntime !== 'string') return
  warnedPerInstance = true
  emitWarning(
    'No `store` was given, so the default MemoryStore counts in this Edge instance only: the Edge runtime runs ' +
      'many instances (per region, and more under load), each with its own counters, so a client gets the limit ' +
      'once per instance. For one exact limit, run the middleware on the Node.js runtime with a RedisStore ' +
      "(`export const config = { runtime: 'nodejs' }`, or Next 16's proxy.ts), or on Cloudflare the Durable " +
      'Object store (docs/next.md#stores); to count per instance on purpose, pass `store: new MemoryStore()`.',
    'RATEWINDOW_PER_ISOLATE_STORE',
  )
}
