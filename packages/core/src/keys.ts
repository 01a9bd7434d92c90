import { isIPv4, isIPv6 } from 'node:net'
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
 * - IPv4 as is (`203.0.113.7`); IPv4-mapped IPv6 (`::ffff:203.0.113.7`) becomes that IPv4;
 * - IPv6 masked to its prefix and compressed per RFC 5952 (`2001:db8:1200::/56`); zone ids are dropped.
 *
 * Throws a `RateLimitError` (`ERR_RATEWINDOW_INVALID_IP`) for anything else: an unknown address must never
 * fall into one bucket shared by everyone.
 */
export function ipKey(address: string, options: IpKeyOptions = {}): string {
  const subnet = parseIpv6Subnet(options.ipv6Subnet)
  const text = typeof address === 'string' ? address.trim() : ''
  if (isIPv4(text)) return text
  const bare = text.replace(/%[^%]*$/, '')
  if (!isIPv6(bare)) {
    throw new RateLimitError('ERR_RATEWINDOW_INVALID_IP', `Not an IP address: ${describeValue(address)}.`, {
      option: 'key',
    })
  }
  const groups = parseIpv6(bare)
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`
  }
  if (subnet === false) return formatIpv6(groups)
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, subnet - i * 16))
    groups[i] = keep === 0 ? 0 : groups[i]! & ((0xffff << (16 - keep)) & 0xffff)
  }
  return `${formatIpv6(groups)}/${subnet}`
}

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
