import { describeValue, invalid, RateLimitError } from '../support/errors.js'
import {
  carriedIpv4,
  IPV4,
  IPV6_DOTTED,
  isMappedIpv4,
  isSpace,
  lowIpv4,
  NOT_AN_IP,
  parseIp,
  parseIpBetween,
} from './ip.js'

/** What an allow or deny list holds: client addresses or networks, and rate limit keys. */
export interface AccessListEntries {
  /** Addresses and CIDR networks, IPv4 and IPv6: `'203.0.113.7'`, `'10.0.0.0/8'`, `'2001:db8::/32'`. */
  ips?: readonly string[]
  /** Rate limit keys as the `key` option gives them (e.g. API keys or user ids). */
  keys?: readonly string[]
}

/**
 * A list of addresses, networks and keys for the `allowList` and `denyList` options, reloadable at run time
 * with `set`. IPv4 entries match IPv4 clients, IPv6 entries IPv6 clients: `::/0` or a bogon list's `::/8` and
 * `::ffff:0:0/96` never match an IPv4 client. An IPv4 client on a dual-stack socket (`::ffff:203.0.113.7`) is
 * an IPv4 client; an entry written as a network inside the IPv4-mapped block (`::ffff:203.0.113.0/120`) is the
 * IPv4 network it names (`203.0.113.0/24`); an IPv6 client that carries an IPv4 (IPv4-compatible, NAT64
 * `64:ff9b::/96`, 6to4, Teredo, as in `ipKey`) matches IPv6 entries by its address and IPv4 entries by that
 * IPv4. Addresses are read by one grammar with `ipKey` (ip.ts). Lookups allocate nothing: networks are merged
 * into sorted ranges searched by bisection, keys sit in a `Set`.
 *
 * ```ts
 * const blocked = new AccessList({ ips: ['198.51.100.0/24'] })
 * app.use(rateLimit({ denyList: blocked }))
 * blocked.set({ ips: ['198.51.100.0/24', '2001:db8:bad::/48'] }) // later, e.g. from an admin endpoint
 * ```
 */
export class AccessList {
  /** Merged IPv4 ranges: per range its first address, then its last. */
  #ipv4: Uint32Array = new Uint32Array(0)
  /** Merged IPv6 ranges: per range 4 words of its first address, then 4 of its last, most significant first. */
  #ipv6: Uint32Array = new Uint32Array(0)
  #keys: ReadonlySet<string> = new Set()

  constructor(entries: AccessListEntries = {}) {
    this.set(entries)
  }

  /** Replaces every entry at once; throws a `RateLimitError` naming a bad entry and keeps the old entries. */
  set(entries: AccessListEntries): void {
    if (typeof entries !== 'object' || entries === null || Array.isArray(entries)) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'entries',
        entries,
        "an object like { ips: ['10.0.0.0/8'] }",
      )
    }
    const { ips = [], keys = [] } = entries
    for (const name of Object.keys(entries)) {
      if (name !== 'ips' && name !== 'keys') {
        throw new RateLimitError(
          'ERR_RATEWINDOW_INVALID_OPTION',
          `An access list holds \`ips\` and \`keys\`; received \`${name}\`.`,
          { option: name },
        )
      }
    }
    if (!Array.isArray(ips)) throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'ips', ips, 'an array of strings')
    if (!Array.isArray(keys))
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'keys', keys, 'an array of strings')
    for (const key of keys) {
      if (typeof key !== 'string') throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'keys', key, 'a string')
    }
    const ipv4: Uint32Array[] = []
    const ipv6: Uint32Array[] = []
    for (const entry of ips) {
      const range = parseNetwork(entry)
      ;(range.length === 2 ? ipv4 : ipv6).push(range)
    }
    this.#ipv4 = mergeRanges(ipv4, 1)
    this.#ipv6 = mergeRanges(ipv6, 4)
    this.#keys = new Set(keys)
  }

  /** Whether no entry is set: an empty list costs nothing per request. */
  get empty(): boolean {
    return this.#ipv4.length === 0 && this.#ipv6.length === 0 && this.#keys.size === 0
  }

  /** @internal Whether the list holds keys (a skipped request's key is computed only then). */
  get keyed(): boolean {
    return this.#keys.size > 0
  }

  /** Whether the list holds `key`. */
  hasKey(key: string): boolean {
    return this.#keys.size > 0 && this.#keys.has(key)
  }

  /**
   * Whether `address` (IPv4 or IPv6 text, zone id allowed) is in a listed network; false for a non-address. An
   * IPv4-mapped address is its IPv4; an IPv6 address that carries an IPv4 is looked up as both.
   */
  hasIp(address: string | undefined): boolean {
    const ipv4 = this.#ipv4
    const ipv6 = this.#ipv6
    if ((ipv4.length === 0 && ipv6.length === 0) || address === undefined) return false
    if (parseIp(address, SCRATCH) === NOT_AN_IP) return false
    if (isMappedIpv4(SCRATCH)) return ipv4.length > 0 && within(ipv4, 1, lowIpv4(SCRATCH), WORDS)
    if (ipv6.length > 0) {
      toWords(SCRATCH, WORDS)
      if (within(ipv6, 4, -1, WORDS)) return true
    }
    if (ipv4.length === 0) return false
    const carried = carriedIpv4(SCRATCH)
    return carried >= 0 && within(ipv4, 1, carried, WORDS)
  }
}

/** The form an option takes: an `AccessList` (reloadable) or its entries. */
export type AccessListOption = AccessList | AccessListEntries

/** An `allowList`/`denyList` option as an `AccessList`, or undefined when absent. */
export function parseAccessList(value: unknown, option: string): AccessList | undefined {
  if (value === undefined || value instanceof AccessList) return value
  if (Array.isArray(value) || typeof value === 'function') {
    // A function exempts the requests it names from an allow list (`skip`), and refuses them from a deny list
    // (`denyList` takes the function itself): never the other way round.
    const forFunction =
      option === 'denyList'
        ? 'for a function of the request, pass it as it is: `denyList: (request) => boolean`.'
        : 'for a function of the request, use `skip: (request) => boolean`.'
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`${option}\` takes an AccessList or \`{ ips: [...], keys: [...] }\`; received ${describeValue(value)}. ` +
        `For @fastify/rate-limit's array of addresses write \`{ ips: [...] }\`; ${forFunction}`,
      { option },
    )
  }
  if (typeof value !== 'object' || value === null) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      option,
      value,
      "an AccessList or an object like { ips: ['10.0.0.0/8'], keys: ['api-key'] }",
    )
  }
  try {
    return new AccessList(value as AccessListEntries)
  } catch (error) {
    if (error instanceof RateLimitError) {
      throw new RateLimitError(error.code, `\`${option}\`: ${error.message}`, { option })
    }
    throw error
  }
}

const SCRATCH = new Uint16Array(8)
const WORDS = new Uint32Array(4)

/**
 * Sorted, merged ranges of `width` words per address (1 for IPv4, 4 for IPv6), flat: per range its first
 * address, then its last.
 */
function mergeRanges(ranges: Uint32Array[], width: number): Uint32Array {
  ranges.sort((a, b) => compare(a, 0, b, 0, width))
  const merged: Uint32Array[] = []
  for (const range of ranges) {
    const last = merged.at(-1)
    if (last !== undefined && compare(range, 0, last, width, width) <= 0) {
      if (compare(range, width, last, width, width) > 0) last.set(range.subarray(width), width)
    } else merged.push(range)
  }
  const flat = new Uint32Array(merged.length * 2 * width)
  for (const [i, range] of merged.entries()) flat.set(range, i * 2 * width)
  return flat
}

/**
 * Whether an address falls in one of the merged, sorted ranges: bisection on the first addresses. The address
 * is `ipv4` for IPv4 ranges (width 1), `words` for IPv6 ones (width 4).
 */
function within(ranges: Uint32Array, width: number, ipv4: number, words: Uint32Array): boolean {
  if (width === 1) words[0] = ipv4
  const step = 2 * width
  let low = 0
  let high = ranges.length / step - 1
  let found = -1
  while (low <= high) {
    const middle = (low + high) >> 1
    if (compareWords(ranges, middle * step, words, width) <= 0) {
      found = middle
      low = middle + 1
    } else high = middle - 1
  }
  return found >= 0 && compareWords(ranges, found * step + width, words, width) >= 0
}

function compareWords(ranges: Uint32Array, offset: number, words: Uint32Array, width: number): number {
  for (let i = 0; i < width; i++) {
    const difference = ranges[offset + i]! - words[i]!
    if (difference !== 0) return difference
  }
  return 0
}

function compare(a: Uint32Array, aOffset: number, b: Uint32Array, bOffset: number, width: number): number {
  for (let i = 0; i < width; i++) {
    const difference = a[aOffset + i]! - b[bOffset + i]!
    if (difference !== 0) return difference
  }
  return 0
}

function toWords(groups: Uint16Array, words: Uint32Array): void {
  for (let i = 0; i < 4; i++) words[i] = ((groups[2 * i]! << 16) | groups[2 * i + 1]!) >>> 0
}

/**
 * One network entry as a range: 2 words (IPv4: first and last address) or 8 (IPv6: 4 words of the first, then
 * 4 of the last). The address reads as in ip.ts, the prefix length as decimal digits without leading zeros;
 * whitespace is allowed around the entry only. A network inside the IPv4-mapped block (`::ffff:0:0/96`, prefix
 * longer than 96) is that IPv4 network; the block itself too when written with a dotted IPv4 (`::ffff:0.0.0.0/96`).
 */
function parseNetwork(entry: unknown): Uint32Array {
  const bad = () =>
    invalid(
      'ERR_RATEWINDOW_INVALID_IP',
      'ips',
      entry,
      "an IPv4 or IPv6 address or CIDR network such as '10.0.0.0/8'",
    )
  if (typeof entry !== 'string') throw bad()
  let start = 0
  let end = entry.length
  while (start < end && isSpace(entry.charCodeAt(start))) start++
  while (end > start && isSpace(entry.charCodeAt(end - 1))) end--
  let slash = entry.indexOf('/', start)
  if (slash < 0 || slash >= end) slash = end
  const groups = new Uint16Array(8)
  const kind = parseIpBetween(entry, start, slash, groups)
  if (kind === NOT_AN_IP) throw bad()
  const full = kind === IPV4 ? 32 : 128
  let length = full
  if (slash < end) {
    length = prefixLength(entry, slash + 1, end)
    if (length < 0 || length > full) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_IP',
        `\`ips\`: ${describeValue(entry)} has a bad prefix length; expected a whole number from 0 to ${full}, without leading zeros.`,
        { option: 'ips' },
      )
    }
  }
  // Inside the IPv4-mapped block: an IPv4 network; the block itself only when written with a dotted IPv4 (as
  // bogon lists write it, `::ffff:0:0/96` is an IPv6 entry, which no IPv4 client matches).
  const mapped = isMappedIpv4(groups) && (length > 96 || (length === 96 && kind === IPV6_DOTTED))
  if (kind === IPV4 || mapped) {
    const bits = kind === IPV4 ? length : length - 96
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
    const address = lowIpv4(groups)
    return Uint32Array.of((address & mask) >>> 0, (address | ~mask) >>> 0)
  }
  const range = new Uint32Array(8)
  const words = new Uint32Array(4)
  toWords(groups, words)
  for (let i = 0; i < 4; i++) {
    const keep = Math.min(32, Math.max(0, length - i * 32))
    const mask = keep === 0 ? 0 : (0xffffffff << (32 - keep)) >>> 0
    range[i] = (words[i]! & mask) >>> 0
    range[4 + i] = (words[i]! | ~mask) >>> 0
  }
  return range
}

/** Decimal digits between `start` and `end`, without a leading zero (`0` itself excepted); -1 otherwise. */
function prefixLength(text: string, start: number, end: number): number {
  if (end === start || end - start > 3) return -1
  if (text.charCodeAt(start) === 48 && end - start > 1) return -1
  let value = 0
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i)
    if (code < 48 || code > 57) return -1
    value = value * 10 + code - 48
  }
  return value
}
