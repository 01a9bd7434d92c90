import type { RateLimitResult, TrustProxy } from '@ratewindow/core'
import {
  addressOptions,
  FetchResponse,
  type FrameworkBinding,
  forwardedClient,
  socketClosed,
  type TrackedResponse,
  trustsEveryAddress,
} from '@ratewindow/core/adapter'
import {
  connectionAddress,
  type H3EventLike,
  isWebEvent,
  nodeResponseOf,
  nodeSocketOf,
  setResponseHeaders,
} from './event.js'

/** How the h3 adapter finds the client address: the options `rateLimit()` and `slowDown()` share. */
export interface H3AddressOptions<E> {
  /**
   * Walk `X-Forwarded-For` back from the connection's address through these proxies: their number (`1` for one
   * load balancer), or their addresses and networks (`'10.0.0.0/8'`, `['127.0.0.1', '::1']`). Never set it
   * without a proxy that writes the header: any client could then choose its own key. h3's own
   * `getRequestIP(event, { xForwardedFor: true })` takes the header's first entry, which the client writes: not
   * used here. @default none
   */
  trustProxy?: TrustProxy
  /** The client address, by your own means (instead of the connection's). Not with `trustProxy`. */
  clientIp?: (event: E) => string | undefined
}

/** The option names of `H3AddressOptions`, for the engine's unknown-option check. */
export const ADDRESS_NAMES = ['trustProxy', 'clientIp'] as const

/**
 * Checked here, at construction: `clientIp` alone, or `trustProxy` walking `X-Forwarded-For` from the
 * connection's address (hop 0), or the connection's address as it is (h3's `getRequestIP` without the header).
 */
export function addressSource<E extends H3EventLike>(
  options: H3AddressOptions<E>,
): (event: E) => string | undefined {
  const { clientIp, trusted } = addressOptions(options, { allowEveryAddress: true })
  if (clientIp !== undefined) return clientIp
  if (trusted === undefined) return connectionAddress
  return (event) => {
    const address = connectionAddress(event)
    if (address === undefined || !trusted(address, 0)) return address
    return forwardedClient(event.headers.get('x-forwarded-for'), trusted) ?? address
  }
}

/** What the engines of `rateLimit()` and `slowDown()` know of h3: the address, the client leaving. */
export function h3Binding<E extends H3EventLike>(
  clientIp: (event: E) => string | undefined,
  options: H3AddressOptions<E>,
  where: string,
): FrameworkBinding<E> {
  const { trustProxy } = options
  return {
    name: 'h3',
    clientIp,
    // The Node socket where there is one (h3 1, h3 2 on Node); elsewhere h3 2's request signal.
    onClose: (event, listener) => {
      const socket = nodeSocketOf(event)
      if (socket !== undefined) return socketClosed(socket, listener)
      const signal = event.req?.signal
      if (signal === undefined) return () => {}
      if (signal.aborted) {
        queueMicrotask(listener)
        return () => {}
      }
      signal.addEventListener('abort', listener, { once: true })
      return () => signal.removeEventListener('abort', listener)
    },
    gone: (event) => event.req?.signal?.aborted === true || nodeSocketOf(event)?.destroyed === true,
    untrustedForwardedFor: (event) =>
      event.headers.get('x-forwarded-for') === null
        ? undefined
        : trustProxy === undefined && options.clientIp === undefined,
    trustProxyHint: `pass \`trustProxy\` to ${where} (the number of proxies in front of the app, or their addresses)`,
    permissiveTrustProxy: () => trustsEveryAddress(trustProxy),
    permissiveTrustProxyHint:
      'Set `trustProxy` to the number of proxies in front of the app (e.g. 1) or their addresses, not a /0 network.',
    options: ADDRESS_NAMES,
    // After `settle`: the headers follow, as long as the response is not sent.
    writeHeaders: (target, headers) => setResponseHeaders(target as E, headers),
  }
}

/**
 * What the engine watches to judge a refund and give back a slot: h3 1's Node response as it is; for h3 2, a
 * `FetchResponse` finished when the chain after the middleware (`next()`) returned.
 */
export function responseOf(event: H3EventLike): TrackedResponse & { finish?(status?: number): void } {
  if (!isWebEvent(event)) {
    const node = nodeResponseOf(event)
    if (node !== undefined) return node
  }
  return new FetchResponse({ signal: event.req?.signal })
}

/** The status of what h3 2's `next()` gave: a `Response`'s, else the prepared one's. */
export function statusOf(event: H3EventLike, body: unknown): number {
  if (body instanceof Response) return body.status
  const prepared = (event.res as { status?: unknown } | undefined)?.status
  return typeof prepared === 'number' ? prepared : 200
}

/** The status of what `next()` threw: an `HTTPError`'s (`createError`), else 500. */
export function errorStatus(error: unknown): number {
  const status = (error as { status?: unknown; statusCode?: unknown } | null)?.status
  return typeof status === 'number' && status >= 400 && status <= 599 ? status : 500
}

/** Replaces the default 429 answer (not for a deny-listed client). */
export type DenialHandler<E> = (event: E, result: RateLimitResult) => Response | Promise<Response>

/** The answer to a request whose client address is not an address: 500, with no detail for the client. */
export const invalidAddressResponse = (): Response =>
  new Response('Internal Server Error', { status: 500, headers: { 'Content-Type': 'text/plain' } })
