/**
 * The key of a call: `key`'s answer, or the client address where it answers `undefined` (so that callers with
 * nothing verified to key by never share a bucket); and the warning for a call that middleware (Next.js's
 * `rateLimit()` in middleware.ts or proxy.ts) limited too.
 */
import { type Awaitable, ipKey } from '@ratewindow/core'
import { emitWarning } from '@ratewindow/core/support'
import { fetchRequestOf } from './binding.js'
import type { TrpcCall } from './options.js'

/** `key`, with `undefined` answered by the key of the call's client address (`address`, IPv6 grouped by /56). */
export function keyOrAddress<TContext, TMeta>(
  key: (call: TrpcCall<TContext, TMeta>) => Awaitable<string | undefined>,
  address: (call: TrpcCall<TContext, TMeta>) => string | undefined,
  ipv6Subnet?: number | false,
): (call: TrpcCall<TContext, TMeta>) => Awaitable<string> {
  const byAddress = (call: TrpcCall<TContext, TMeta>, chosen: string | undefined) =>
    chosen ?? ipKey(address(call) ?? '', { ipv6Subnet })
  return (call) => {
    const chosen = key(call)
    return chosen instanceof Promise ? chosen.then((each) => byAddress(call, each)) : byAddress(call, chosen)
  }
}

/**
 * The request header through which `@ratewindow/next`'s middleware limiter passes its decision on to the route
 * (the RateLimit fields it sends; the same name in packages/next/src/proxied.ts).
 */
const PROXY_DECISION_HEADER = 'x-ratewindow-proxy'

let warned = false

/**
 * Warns once when a call that sends RateLimit fields was limited by Next.js middleware too, which sent its own:
 * Next.js keeps the middleware's fields over the route's, so the response would state both quotas.
 */
export function noteProxyFields(call: TrpcCall, headers: Record<string, string>): void {
  if (warned || headers['RateLimit-Policy'] === undefined) return
  const proxied = fetchRequestOf(call)?.headers.get(PROXY_DECISION_HEADER)
  if (proxied === null || proxied === undefined || proxied === '') return
  warned = true
  emitWarning(
    'Next.js middleware (or proxy.ts) and this tRPC rateLimit() both limited a call, and both send RateLimit ' +
      "fields: Next.js sets the middleware's fields on the response before the route runs and keeps them, so a " +
      "refusal of tRPC goes out with the middleware's `RateLimit-Remaining` beside tRPC's `Retry-After`. Give " +
      "the middleware's limiter `headers: false` for the tRPC route " +
      '(docs/next.md#middleware-and-a-route-limiter-on-one-request).',
    'RATEWINDOW_MIXED_HEADERS',
  )
}
