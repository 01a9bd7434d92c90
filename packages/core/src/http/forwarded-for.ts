/**
 * The client address behind proxies the app names (`trustProxy`), for adapters whose framework has no trust-proxy
 * setting of its own (Hono, Next.js): the option checked once into a rule (`trustedProxies`), and
 * `X-Forwarded-For` read from the right past the hops that rule trusts (`forwardedClient`).
 */
import { RateLimitError } from '../support/errors.js'
import { AccessList } from './access-list.js'

/**
 * The proxies in front of the app that append to `X-Forwarded-For`: their number (`1` for one load balancer), or
 * their addresses and networks (`'10.0.0.0/8'`, `['127.0.0.1', '::1']`).
 */
export type TrustProxy = number | string | readonly string[]

/**
 * Whether `address`, the `hop`-th counted back from the app, is a trusted proxy's: hop 0 is the connection's peer,
 * hop 1 the rightmost `X-Forwarded-For` entry, hop 2 the one before it, and so on.
 */
export type TrustedHop = (address: string, hop: number) => boolean

/**
 * `trustProxy` checked, as a rule: with a number `n`, the first `n` hops (the peer and `n - 1` entries) are
 * proxies; with addresses and networks, the hops whose address they hold. Throws `ERR_RATEWINDOW_INVALID_OPTION`
 * naming `trustProxy` for anything else, and for a `/0` network (every address: any client could then choose its
 * own key) unless `allowEveryAddress` (for an adapter that warns of it instead).
 */
export function trustedProxies(trustProxy: TrustProxy, { allowEveryAddress = false } = {}): TrustedHop {
  if (typeof trustProxy === 'number') {
    if (!Number.isSafeInteger(trustProxy) || trustProxy < 1) {
      throw invalidTrustProxy(
        `\`trustProxy\` must be the number of proxies in front of the app (a whole number >= 1), or their addresses; received ${trustProxy}.`,
      )
    }
    return (_, hop) => hop < trustProxy
  }
  const entries = typeof trustProxy === 'string' ? [trustProxy] : trustProxy
  if (
    !Array.isArray(entries) ||
    entries.length === 0 ||
    !entries.every((entry) => typeof entry === 'string')
  ) {
    throw invalidTrustProxy(
      "`trustProxy` must be a number of proxies, or an address or network ('10.0.0.0/8'), or a non-empty array of them.",
    )
  }
  if (!allowEveryAddress && trustsEveryAddress(entries))
    throw invalidTrustProxy(
      `\`trustProxy\` trusts every address (${entries.join(', ')}): any client could then choose its own key. Name your proxies' addresses, or their number.`,
    )
  let proxies: AccessList
  try {
    proxies = new AccessList({ ips: entries })
  } catch (error) {
    throw invalidTrustProxy(`\`trustProxy\`: ${(error as Error).message}`)
  }
  return (address) => proxies.hasIp(address)
}

/** Whether `trustProxy` trusts every address (a `/0` network): any client then chooses its own key. */
export function trustsEveryAddress(trustProxy: TrustProxy | undefined): boolean {
  if (trustProxy === undefined || typeof trustProxy === 'number') return false
  const entries = typeof trustProxy === 'string' ? [trustProxy] : trustProxy
  return entries.some((entry) => /\/0$/.test(entry.trim()))
}

/**
 * The client in `X-Forwarded-For` (`header`), for a request that came through a trusted proxy (hop 0: the
 * connection's peer, which the caller checked with `trusted`; or the platform's own proxy where the app sees no
 * connection, as on Next.js): from the right (hop 1), the first entry `trusted` refuses; the leftmost one when it
 * trusts every entry. Undefined without the header or without an entry in it: no proxy forwarded the request.
 */
export function forwardedClient(header: string | null | undefined, trusted: TrustedHop): string | undefined {
  if (header === null || header === undefined) return undefined
  const hops = header.split(',')
  let address: string | undefined
  for (let hop = 1, i = hops.length - 1; i >= 0; i--) {
    const next = hops[i]!.trim()
    if (next === '') continue
    address = next
    if (!trusted(address, hop++)) break
  }
  return address
}

function invalidTrustProxy(message: string): RateLimitError {
  return new RateLimitError('ERR_RATEWINDOW_INVALID_OPTION', message, { option: 'trustProxy' })
}
