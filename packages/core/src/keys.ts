import { isIPv6 } from 'node:net'
import { describeValue, invalid, RateLimitError } from './errors.js'

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
 * docs/security.md has the table.
 *
 * Throws a `RateLimitError` (`ERR_RATEWINDOW_INVALID_IP`) for anything else: an unknown address must never
 * fall into one bucket shared by everyone.
 */
export function ipKey(address: string, options: IpKeyOptions = {}): string {
  const subnet = parseIpv6Subnet(options.ipv6Subnet)
  const text = typeof address === 'string' ? address.trim() : ''
  if (isDottedQuad(text)) return text
  const bare = text.replace(/%[^%]*$/, '')
  if (!isIPv6(bare)) {
    throw new RateLimitError('ERR_RATEWINDOW_INVALID_IP', `Not an IP address: ${describeValue(address)}.`, {
      option: 'key',
    })
  }
  const groups = parseIpv6(bare)
  const special = SPECIAL_BLOCKS.find((block) => block.matches(groups))
  if (special !== undefined) return special.key(groups)
  if (subnet === false) return formatIpv6(groups)
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, subnet - i * 16))
    groups[i] = keep === 0 ? 0 : groups[i]! & ((0xffff << (16 - keep)) & 0xffff)
  }
  return `${formatIpv6(groups)}/${subnet}`
}

/**
 * Node's `isIPv4` without its regular expression (the hot path of every request keyed by IP): four decimal
 * octets from 0 to 255, no leading zeros. A test checks both agree.
 * @internal
 */
export function isDottedQuad(text: string): boolean {
  const length = text.length
  if (length < 7 || length > 15) return false
  let octets = 0
  let value = 0
  let digits = 0
  for (let i = 0; i <= length; i++) {
    const code = i === length ? 46 : text.charCodeAt(i)
    if (code === 46) {
      // '.' or the end: closes an octet.
      if (digits === 0 || value > 255) return false
      octets++
      value = 0
      digits = 0
    } else if (code >= 48 && code <= 57) {
      // A leading zero is only valid as the whole octet.
      if (digits === 1 && value === 0) return false
      value = value * 10 + code - 48
      digits++
      if (digits > 3) return false
    } else return false
  }
  return octets === 4
}

interface SpecialBlock {
  block: string
  matches(groups: readonly number[]): boolean
  key(groups: readonly number[]): string
}

/** Dotted IPv4 from two 16-bit groups. */
const ipv4 = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`
const zeros = (groups: readonly number[], from: number, to: number) =>
  groups.slice(from, to).every((group) => group === 0)

/**
 * IPv6 blocks that are not one subscriber's prefix, and their keys; checked in order, before `ipv6Subnet`
 * applies. Keep in step with the table in docs/security.md (a test checks that each block is there).
 * @internal
 */
export const SPECIAL_BLOCKS: readonly SpecialBlock[] = [
  // Loopback and unspecified: one host each, never grouped with the IPv4-compatible block below.
  { block: '::1/128, ::/128', matches: (g) => zeros(g, 0, 7) && g[7]! <= 1, key: formatIpv6 },
  // IPv4-mapped: an IPv4 client on a dual-stack socket.
  {
    block: '::ffff:0:0/96',
    matches: (g) => zeros(g, 0, 5) && g[5] === 0xffff,
    key: (g) => ipv4(g[6]!, g[7]!),
  },
  // IPv4-compatible (deprecated, RFC 4291): the low 32 bits are the IPv4 address.
  { block: '::/96', matches: (g) => zeros(g, 0, 6), key: (g) => ipv4(g[6]!, g[7]!) },
  // NAT64 well-known prefix (RFC 6052): an IPv4 client translated; the low 32 bits are its address.
  {
    block: '64:ff9b::/96',
    matches: (g) => g[0] === 0x64 && g[1] === 0xff9b && zeros(g, 2, 6),
    key: (g) => ipv4(g[6]!, g[7]!),
  },
  // Local-use NAT64 (RFC 8215): where the IPv4 sits depends on the operator's prefix length, but each IPv4
  // client has one fixed address (the suffix is zero): key the whole address.
  {
    block: '64:ff9b:1::/48',
    matches: (g) => g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1,
    key: formatIpv6,
  },
  // 6to4 (RFC 3056): a site's /48 is 2002:<its IPv4>::/48.
  { block: '2002::/16', matches: (g) => g[0] === 0x2002, key: (g) => ipv4(g[1]!, g[2]!) },
  // Teredo (RFC 4380): the client's public IPv4 (its NAT's), stored inverted in the low 32 bits.
  {
    block: '2001::/32',
    matches: (g) => g[0] === 0x2001 && g[1] === 0,
    key: (g) => ipv4(~g[6]! & 0xffff, ~g[7]! & 0xffff),
  },
  // Link-local: meaningful on one link only, where each host picks its own; one key per address.
  { block: 'fe80::/10', matches: (g) => (g[0]! & 0xffc0) === 0xfe80, key: formatIpv6 },
]

/** Eight 16-bit groups from a valid IPv6 text (checked by `isIPv6` first). */
function parseIpv6(text: string): number[] {
  const [head = '', tail] = text.split('::')
  const parse = (part: string): number[] => {
    if (part === '') return []
    const groups: number[] = []
    for (const piece of part.split(':')) {
      if (piece.includes('.')) {
        const [a = 0, b = 0, c = 0, d = 0] = piece.split('.').map(Number)
        groups.push((a << 8) | b, (c << 8) | d)
      } else groups.push(Number.parseInt(piece, 16))
    }
    return groups
  }
  const left = parse(head)
  if (tail === undefined) return left
  const right = parse(tail)
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right]
}

/** RFC 5952: lowercase, no leading zeros, the longest run (>= 2) of zero groups as `::`, leftmost on ties. */
function formatIpv6(groups: readonly number[]): string {
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((group) => group.toString(16))
  if (bestStart < 0) return hex.join(':')
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`
}
