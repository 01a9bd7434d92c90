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
 * trusts every entry. An entry is read without the port a proxy may write (`withoutPort`). Undefined without the
 * header or without an entry in it: no proxy forwarded the request.
 */
export function forwardedClient(header: string | null | undefined, trusted: TrustedHop): string | undefined {
  if (header === null || header === undefined) return undefined
  const hops = header.split(',')
  let address: string | undefined
  for (let hop = 1, i = hops.length - 1; i >= 0; i--) {
    const next = hops[i]!.trim()
    if (next === '') continue
    address = withoutPort(next)
    if (!trusted(address, hop++)) break
  }
  return address
}

/**
 * The address of one `X-Forwarded-For` entry: some proxies write the client's port too, `203.0.113.7:51234` or
 * `[2001:db8::1]:443` (IPv6 in brackets, with or without a port). Anything else is returned as it is: an entry
 * that is not an address stays one, for the key to refuse (`ERR_RATEWINDOW_INVALID_IP`), never to share a bucket.
 * NOTE: an IPv6 address without brackets is never cut: its last group would read as a port.
 */
export function withoutPort(entry: string): string {
  if (entry.charCodeAt(0) === 91 /* [ */) {
    const close = entry.indexOf(']')
    if (close < 0) return entry
    const rest = entry.length - close - 1
    return rest === 0 || (entry.charCodeAt(close + 1) === 58 /* : */ && isPort(entry, close + 2))
      ? entry.slice(1, close)
      : entry
  }
  const colon = entry.indexOf(':')
  if (colon < 0 || entry.indexOf(':', colon + 1) >= 0 || entry.indexOf('.') < 0) return entry
  return isPort(entry, colon + 1) ? entry.slice(0, colon) : entry
}

/** Whether `text` from `start` to its end is a port: 1 to 5 decimal digits. */
function isPort(text: string, start: number): boolean {
  const length = text.length - start
  if (length < 1 || length > 5) return false
  for (let i = start; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 48 || code > 57) return false
  }
  return true
}

function invalidTrustProxy(message: string): RateLimitError {
  return new RateLimitError('ERR_RATEWINDOW_INVALID_OPTION', message, { option: 'trustProxy' })
}
