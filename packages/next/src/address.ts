import { RateLimitError, type TrustProxy } from '@ratewindow/core'
import { addressOptions, forwardedClient } from '@ratewindow/core/adapter'

/** What every entry point reads of a request: its headers (a `Request`, a `NextRequest`, a server action's). */
export interface HeadersCarrier {
  readonly headers: { get(name: string): string | null }
}

/**
 * How `@ratewindow/next` finds the client address. Next.js gives no connection address (`NextRequest.ip` is gone
 * since Next 15): it comes from `X-Forwarded-For`, as far as the proxies you trust wrote it.
 */
export interface NextAddressOptions<Req extends HeadersCarrier = HeadersCarrier> {
  /**
   * The proxies in front of the app that append to `X-Forwarded-For`: their number (`1` on Vercel and for a
   * `next start` behind one proxy: the rightmost entry is the client), or their addresses and networks
   * (`'10.0.0.0/8'`, `['127.0.0.1', '::1']`: entries are read from the right, past the trusted ones). With neither
   * this, `clientIp` nor `key`, construction throws: Next.js alone cannot tell a client's address. @default none
   */
  trustProxy?: TrustProxy
  /** The client address, by your own means (e.g. Vercel's `x-real-ip`), instead of `trustProxy`. */
  clientIp?: (request: Req) => string | undefined
}

/** The option names of `NextAddressOptions`, for the engine's unknown-option check. */
export const ADDRESS_OPTIONS = ['trustProxy', 'clientIp'] as const

export function invalidOption(option: string, message: string): RateLimitError {
  return new RateLimitError('ERR_RATEWINDOW_INVALID_OPTION', message, { option })
}

/**
 * How the client address is found: checked here, at construction. `where` names the entry point and `keyed`
 * says whether a `key` function was given (then no address is needed).
 */
export function addressSource<Req extends HeadersCarrier>(
  options: NextAddressOptions<Req>,
  keyed: boolean,
  where: string,
): ((request: Req) => string | undefined) | undefined {
  const { clientIp, trusted } = addressOptions(options)
  if (clientIp !== undefined) return clientIp
  if (trusted === undefined) {
    if (keyed) return undefined
    throw invalidOption(
      'trustProxy',
      `${where}: Next.js does not tell the client's address, so it must come from X-Forwarded-For as written by proxies you trust. ` +
        'Pass `trustProxy: 1` on Vercel or for `next start` behind one proxy (the number of proxies in front of the app, ' +
        "or their addresses: '10.0.0.0/8'), or `clientIp(request)`, or a `key` function (docs/next.md#the-client-address).",
    )
  }
  // Next.js sees no connection: the request came through the platform's proxy, hop 0 of `trustProxy`'s count.
  return (request) => forwardedClient(request.headers.get('x-forwarded-for'), trusted)
}
