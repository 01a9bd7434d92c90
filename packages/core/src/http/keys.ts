import { describeValue, invalid, RateLimitError } from '../support/errors.js'
import { formatIpv6, IPV4, IPV4_CARRIERS, ipv4Text, isSpace, NOT_AN_IP, parseIp, zeros } from './ip.js'

export interface IpKeyOptions {
  /**
   * Prefix length that IPv6 clients are grouped by. One subscriber usually holds a whole /56 (or /48, /64),
   * so limiting single addresses lets a client rotate through billions of them.
   * `false` keeps full addresses. @default 56
   */
  ipv6Subnet?: number | false
}

export const DEFAULT_IPV6_SUBNET = 56

/** Validates `ipv6Subnet`: a whole number from 1 to 128, or false. */
export function parseIpv6Subnet(value: unknown): number | false {
  if (value === undefined) return DEFAULT_IPV6_SUBNET
  if (value === false) return false
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 128) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'ipv6Subnet',
      value,
      'a whole number from 1 to 128, or false',
    )
  }
  return value
}

/**
 * The rate limit key for a client address, in canonical text:
 * - IPv4 as is (`203.0.113.7`);
 * - IPv6 that embeds the client's IPv4 address (IPv4-mapped, IPv4-compatible, NAT64 `64:ff9b::/96`, 6to4,
 *   Teredo) becomes that IPv4, so the client shares its bucket with its IPv4 self;
 * - blocks that are not one subscriber's prefix get their own deliberate key;
 * - other IPv6 masked to its prefix and compressed per RFC 5952 (`2001:db8:1200::/56`); zone ids are dropped.
 * docs/security.md has the table. Addresses are read by the grammar of access lists (ip.ts): strict dotted
 * decimal IPv4 (`127.0.0.01` is refused), whitespace around the address ignored.
 *
 * Throws a `RateLimitError` (`ERR_RATEWINDOW_INVALID_IP`) for anything else: an unknown address must never
 * fall into one bucket shared by everyone.
 */
export function ipKey(address: string, options: IpKeyOptions = {}): string {
  return keyOfIp(address, parseIpv6Subnet(options.ipv6Subnet))
}

/** The most IPv6 keys an `IpKeys` remembers; when full, it forgets them all at once and starts again. */
const REMEMBERED_IPV6_KEYS = 4_096
/**
 * The longest address text remembered: IPv6 text is at most 45 characters, but a zone id (`%eth0`, ignored) may
 * be of any length, and long texts must not make the bound in keys a bound in nothing.
 */
const REMEMBERED_LENGTH = 64

/**
 * `ipKey` for one middleware: `ipv6Subnet` parsed once, and the keys of recent IPv6 addresses remembered by
 * their text (bounded), so that a client seen again costs a lookup instead of a parse and a format. An IPv4
 * address, its own key, is parsed each time: that allocates nothing, and a bounded cache would only churn under
 * many clients.
 * @internal
 */
export class IpKeys {
  readonly #subnet: number | false
  readonly #ipv6 = new Map<string, string>()

  constructor(ipv6Subnet: unknown) {
    this.#subnet = parseIpv6Subnet(ipv6Subnet)
  }

  /** The key of `address`, as `ipKey` gives it; throws as `ipKey` does. */
  of(address: string): string {
    const known = this.#ipv6.get(address)
    if (known !== undefined) return known
    const key = keyOfIp(address, this.#subnet)
    // An IPv4 address is its own key: nothing to remember.
    if (key === address || address.length > REMEMBERED_LENGTH) return key
    if (this.#ipv6.size >= REMEMBERED_IPV6_KEYS) this.#ipv6.clear()
    this.#ipv6.set(address, key)
    return key
  }
}

/** `ipKey` with `ipv6Subnet` already parsed. */
function keyOfIp(address: string, subnet: number | false): string {
  const kind = typeof address === 'string' ? parseIp(address, GROUPS) : NOT_AN_IP
  if (kind === IPV4) return isTrimmed(address) ? address : address.trim()
  if (kind === NOT_AN_IP) {
    throw new RateLimitError('ERR_RATEWINDOW_INVALID_IP', `Not an IP address: ${describeValue(address)}.`, {
      option: 'key',
    })
  }
  const groups = GROUPS
  for (const special of SPECIAL_BLOCKS) if (special.matches(groups)) return special.key(groups)
  if (subnet === false) return formatIpv6(groups)
  // Masked in place: GROUPS is scratch space, read again only by the next parse.
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, subnet - i * 16))
    groups[i] = keep === 0 ? 0 : groups[i]! & ((0xffff << (16 - keep)) & 0xffff)
  }
  return `${formatIpv6(groups)}/${subnet}`
}

const GROUPS = new Uint16Array(8)

const isTrimmed = (text: string) => !isSpace(text.charCodeAt(0)) && !isSpace(text.charCodeAt(text.length - 1))

interface SpecialBlock {
  block: string
  matches(groups: ArrayLike<number>): boolean
  key(groups: ArrayLike<number>): string
}

/**
 * IPv6 blocks that are not one subscriber's prefix, and their keys; checked in order, before `ipv6Subnet`
 * applies. Keep in step with the table in docs/security.md (a test checks that each block is there).
 * @internal
 */
export const SPECIAL_BLOCKS: readonly SpecialBlock[] = [
  // Loopback and unspecified: one host each, never grouped with the IPv4-compatible block.
  {
    block: '::1/128, ::/128',
    matches: (g) => zeros(g, 0, 7) && g[7]! <= 1,
    key: formatIpv6,
  },
  // The blocks that carry an IPv4 client's address (ip.ts): keyed by that IPv4.
  ...IPV4_CARRIERS.map(({ block, matches, ipv4 }) => ({
    block,
    matches,
    key: (g: ArrayLike<number>) => ipv4Text(ipv4(g)),
  })),
  // Local-use NAT64 (RFC 8215): where the IPv4 sits depends on the operator's prefix length, but each IPv4
  // client has one fixed address (the suffix is zero): key the whole address.
  {
    block: '64:ff9b:1::/48',
    matches: (g) => g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1,
    key: formatIpv6,
  },
  // Link-local: meaningful on one link only, where each host picks its own; one key per address.
  { block: 'fe80::/10', matches: (g) => (g[0]! & 0xffc0) === 0xfe80, key: formatIpv6 },
]
