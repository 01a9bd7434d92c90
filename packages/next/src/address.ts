import { AccessList, RateLimitError } from '@ratewindow/core'

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
  trustProxy?: number | string | readonly string[]
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
  const { trustProxy, clientIp } = options
  if (clientIp !== undefined) {
    if (typeof clientIp !== 'function')
      throw invalidOption('clientIp', '`clientIp` must be a function of the request returning an address.')
    if (trustProxy !== undefined)
      throw invalidOption(
        'trustProxy',
        'Pass `trustProxy` or `clientIp`, not both: `clientIp` finds the address itself.',
      )
    return clientIp
  }
  if (trustProxy === undefined) {
    if (keyed) return undefined
    throw invalidOption(
      'trustProxy',
      `${where}: Next.js does not tell the client's address, so it must come from X-Forwarded-For as written by proxies you trust. ` +
        'Pass `trustProxy: 1` on Vercel or for `next start` behind one proxy (the number of proxies in front of the app, ' +
        "or their addresses: '10.0.0.0/8'), or `clientIp(request)`, or a `key` function (docs/next.md#the-client-address).",
    )
  }
  const trusted = trustRule(trustProxy)
  return (request) => forwardedClient(request.headers.get('x-forwarded-for'), trusted)
}

/** `trustProxy` as a rule: whether the `hop`-th entry from the right (0 first), `address`, is a trusted proxy's. */
function trustRule(
  trustProxy: number | string | readonly string[],
): (address: string, hop: number) => boolean {
  if (typeof trustProxy === 'number') {
    if (!Number.isSafeInteger(trustProxy) || trustProxy < 1) {
      throw invalidOption(
        'trustProxy',
        `\`trustProxy\` must be the number of proxies in front of the app (a whole number >= 1), or their addresses; received ${trustProxy}.`,
      )
    }
    // The entry each proxy appended is the address it saw: the client is the `trustProxy`-th from the right.
    return (_, hop) => hop < trustProxy - 1
  }
  const entries = typeof trustProxy === 'string' ? [trustProxy] : trustProxy
  if (
    !Array.isArray(entries) ||
    entries.length === 0 ||
    !entries.every((entry) => typeof entry === 'string')
  ) {
    throw invalidOption(
      'trustProxy',
      "`trustProxy` must be a number of proxies, or an address or network ('10.0.0.0/8'), or a non-empty array of them.",
    )
  }
  if (entries.some((entry) => /\/0$/.test(entry.trim())))
    throw invalidOption(
      'trustProxy',
      `\`trustProxy\` trusts every address (${entries.join(', ')}): any client could then choose its own key. Name your proxies' addresses, or their number.`,
    )
  let proxies: AccessList
  try {
    proxies = new AccessList({ ips: entries })
  } catch (error) {
    throw invalidOption('trustProxy', `\`trustProxy\`: ${(error as Error).message}`)
  }
  return (address) => proxies.hasIp(address)
}

/**
 * The client in `X-Forwarded-For`: from the right, the first entry `trusted` refuses; the leftmost one when it
 * trusts every entry. Undefined without the header (a request no proxy forwarded: nothing to key it by).
 */
function forwardedClient(
  header: string | null,
  trusted: (address: string, hop: number) => boolean,
): string | undefined {
  if (header === null) return undefined
  const hops = header.split(',')
  let address: string | undefined
  for (let hop = 0, i = hops.length - 1; i >= 0; i--) {
    const next = hops[i]!.trim()
    if (next === '') continue
    address = next
    if (!trusted(address, hop++)) break
  }
  return address
}
