/**
 * The address options of adapters whose framework tells no trusted client address itself (Hono, Next.js, tRPC):
 * `clientIp` (the address by the app's own means) or `trustProxy` (the proxies whose X-Forwarded-For entries are
 * read), checked one way at construction. Each adapter then reads the address where its framework keeps it.
 */
import { RateLimitError } from '../support/errors.js'
import { fnOption } from '../support/validators.js'
import { type TrustedHop, type TrustProxy, trustedProxies } from './forwarded-for.js'

/** The two address options, as an adapter's users pass them. */
export interface AddressOptions<Req> {
  /** The proxies in front of the app that append to `X-Forwarded-For`: their number, or their addresses. */
  trustProxy?: TrustProxy
  /** The client address, by your own means, instead of `trustProxy`. */
  clientIp?: (request: Req) => string | undefined
}

/** The address options checked: `clientIp` as given, or the proxies `trustProxy` trusts, or neither. */
export interface AddressSource<Req> {
  clientIp: ((request: Req) => string | undefined) | undefined
  trusted: TrustedHop | undefined
}

/**
 * Checks `clientIp` (a function) and `trustProxy` (see `trustedProxies`), one or the other. `allowEveryAddress`:
 * a `/0` network is accepted (the engine warns of it) where the adapter knows the connection's own address.
 */
export function addressOptions<Req>(
  { clientIp, trustProxy }: AddressOptions<Req>,
  { allowEveryAddress = false } = {},
): AddressSource<Req> {
  if (clientIp !== undefined) {
    fnOption(clientIp, 'clientIp', 'a function of the request returning an address')
    if (trustProxy !== undefined)
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'Pass `trustProxy` or `clientIp`, not both: `clientIp` finds the address itself.',
        { option: 'trustProxy' },
      )
  }
  const trusted = trustProxy === undefined ? undefined : trustedProxies(trustProxy, { allowEveryAddress })
  return { clientIp, trusted }
}
