import type { TrustProxy } from '@ratewindow/core'
import { addressOptions, forwardedClient } from '@ratewindow/core/adapter'
import type { RequestEvent } from '@sveltejs/kit'

/**
 * How `@ratewindow/sveltekit` finds the client address: `event.getClientAddress()` by default, which is what the
 * deployment's adapter says (adapter-node: the socket's peer, or the header its `ADDRESS_HEADER` names as deep as
 * `XFF_DEPTH`: the adapter's trust setting).
 */
export interface KitAddressOptions<E extends RequestEvent = RequestEvent> {
  /**
   * Walk `X-Forwarded-For` back from `event.getClientAddress()` through these proxies: their number (`1` for one
   * load balancer), or their addresses and networks (`'10.0.0.0/8'`, `['127.0.0.1', '::1']`). Only where the
   * adapter itself reads no forwarding header: with adapter-node, set its `ADDRESS_HEADER` and `XFF_DEPTH`
   * instead, or this, never both. Never set it without a proxy that writes the header: any client could then
   * choose its own key. @default none
   */
  trustProxy?: TrustProxy
  /** The client address, by your own means (instead of `event.getClientAddress()`). Not with `trustProxy`. */
  clientIp?: (event: E) => string | undefined
}

/** The option names of `KitAddressOptions`, for the engine's unknown-option check. */
export const ADDRESS_NAMES = ['trustProxy', 'clientIp'] as const

/**
 * `event.getClientAddress()`, or undefined where it throws: adapter-node throws for a request without the header
 * its `ADDRESS_HEADER` names (or with fewer entries than `XFF_DEPTH`), a request that came round the proxy. Such
 * a request has no address: the middleware answers it 500, counting nothing, with one warning.
 */
export function platformAddress(event: RequestEvent): string | undefined {
  try {
    return event.getClientAddress()
  } catch {
    return undefined
  }
}

/** The entries of `X-Forwarded-For`, trimmed; empty when there is none. */
export function forwardedEntries(event: RequestEvent): string[] {
  const header = event.request.headers.get('x-forwarded-for')
  return header === null ? [] : header.split(',').map((entry) => entry.trim())
}

/**
 * Checked here, at construction: `clientIp` alone, or `trustProxy` walking `X-Forwarded-For` from the platform's
 * address (hop 0), or the platform's address as it is.
 */
export function addressSource<E extends RequestEvent>(
  options: KitAddressOptions<E>,
): (event: E) => string | undefined {
  const { clientIp, trusted } = addressOptions(options, { allowEveryAddress: true })
  if (clientIp !== undefined) return clientIp
  if (trusted === undefined) return platformAddress
  return (event) => {
    const address = platformAddress(event)
    if (address === undefined || !trusted(address, 0)) return address
    return forwardedClient(event.request.headers.get('x-forwarded-for'), trusted) ?? address
  }
}
