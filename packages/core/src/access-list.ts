import { isIP } from 'node:net'
import { describeValue, invalid, RateLimitError } from './errors.js'

/** What an allow or deny list holds: client addresses or networks, and rate limit keys. */
export interface AccessListEntries {
  /** Addresses and CIDR networks, IPv4 and IPv6: `'203.0.113.7'`, `'10.0.0.0/8'`, `'2001:db8::/32'`. */
  ips?: readonly string[]
  /** Rate limit keys as the `key` option gives them (e.g. API keys or user ids). */
  keys?: readonly string[]
}

/**
 * A list of addresses, networks and keys for the `allowList` and `denyList` options, reloadable at run time
 * with `set`. IPv4 lives in the IPv4-mapped IPv6 block, so `::ffff:203.0.113.7` is `203.0.113.7`; an IPv6
 * address that carries a client's IPv4 (IPv4-compatible, NAT64 `64:ff9b::/96`, 6to4, Teredo, as in `ipKey`)
 * also matches by that IPv4. Lookups allocate nothing: networks are merged into sorted ranges searched by
 * bisection, keys sit in a `Set`.
 *
 * ```ts
 * const blocked = new AccessList({ ips: ['198.51.100.0/24'] })
 * app.use(rateLimit({ denyList: blocked }))
 * blocked.set({ ips: ['198.51.100.0/24', '2001:db8:bad::/48'] }) // later, e.g. from an admin endpoint
 * ```
 */
export class AccessList {
  /** Merged ranges: per range 4 words of its first address, then 4 of its last, most significant first. */
  #ranges: Uint32Array = new Uint32Array(0)
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
    const ranges = ips.map(parseNetwork).sort((a, b) => compare(a, 0, b, 0))
    const merged: Uint32Array[] = []
    for (const range of ranges) {
      const last = merged.at(-1)
      if (last !== undefined && compare(range, 0, last, 4) <= 0) {
        if (compare(range, 4, last, 4) > 0) last.set(range.subarray(4), 4)
      } else merged.push(range)
    }
    const flat = new Uint32Array(merged.length * 8)
    for (const [i, range] of merged.entries()) flat.set(range, i * 8)
    this.#ranges = flat
    this.#keys = new Set(keys)
  }

  /** Whether no entry is set: an empty list costs nothing per request. */
  get empty(): boolean {
    return this.#ranges.length === 0 && this.#keys.size === 0
  }

  /** Whether the list holds `key`. */
  hasKey(key: string): boolean {
    return this.#keys.size > 0 && this.#keys.has(key)
  }

  /** Whether `address` (IPv4 or IPv6 text, zone id allowed) is in a listed network; false for a non-address. */
  hasIp(address: string | undefined): boolean {
    const ranges = this.#ranges
    if (ranges.length === 0 || address === undefined || !parseInto(address, SCRATCH)) return false
    toWords(SCRATCH, WORDS)
    if (within(ranges, WORDS)) return true
    const embedded = embeddedIpv4(SCRATCH)
    if (embedded < 0) return false
    WORDS[0] = 0
    WORDS[1] = 0
    WORDS[2] = 0xffff
    WORDS[3] = embedded
    return within(ranges, WORDS)
  }
}

/** The form an option takes: an `AccessList` (reloadable) or its entries. */
export type AccessListOption = AccessList | AccessListEntries

/** An `allowList`/`denyList` option as an `AccessList`, or undefined when absent. */
export function parseAccessList(value: unknown, option: string): AccessList | undefined {
  if (value === undefined || value instanceof AccessList) return value
  if (Array.isArray(value) || typeof value === 'function') {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`${option}\` takes an AccessList or \`{ ips: [...], keys: [...] }\`; received ${describeValue(value)}. ` +
        "For @fastify/rate-limit's array of addresses write `{ ips: [...] }`; for a function of the request, " +
        'use `skip: (request) => boolean`.',
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

/** Whether the address words fall in one of the merged, sorted ranges: bisection on the first addresses. */
function within(ranges: Uint32Array, words: Uint32Array): boolean {
  let low = 0
  let high = ranges.length / 8 - 1
  let found = -1
  while (low <= high) {
    const middle = (low + high) >> 1
    if (compareWords(ranges, middle * 8, words) <= 0) {
      found = middle
      low = middle + 1
    } else high = middle - 1
  }
  return found >= 0 && compareWords(ranges, found * 8 + 4, words) >= 0
}

function compareWords(ranges: Uint32Array, offset: number, words: Uint32Array): number {
  for (let i = 0; i < 4; i++) {
    const difference = ranges[offset + i]! - words[i]!
    if (difference !== 0) return difference
  }
  return 0
}

function compare(a: Uint32Array, aOffset: number, b: Uint32Array, bOffset: number): number {
  for (let i = 0; i < 4; i++) {
    const difference = a[aOffset + i]! - b[bOffset + i]!
    if (difference !== 0) return difference
  }
  return 0
}

function toWords(groups: Uint16Array, words: Uint32Array): void {
  for (let i = 0; i < 4; i++) words[i] = ((groups[2 * i]! << 16) | groups[2 * i + 1]!) >>> 0
}

/**
 * The client IPv4 an IPv6 address carries (the blocks of `ipKey`): IPv4-compatible, NAT64, 6to4 and Teredo;
 * -1 for none. (IPv4-mapped is the IPv4 itself here.)
 */
function embeddedIpv4(g: Uint16Array): number {
  const low = ((g[6]! << 16) | g[7]!) >>> 0
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0) {
    return g[6] === 0 ? -1 : low // ::/96 but not :: or ::1
  }
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0) return low
  if (g[0] === 0x2002) return ((g[1]! << 16) | g[2]!) >>> 0
  if (g[0] === 0x2001 && g[1] === 0) return ~low >>> 0
  return -1
}

/** One network entry as 8 words: its first then its last address. */
function parseNetwork(entry: unknown): Uint32Array {
  const bad = () =>
    invalid(
      'ERR_RATEWINDOW_INVALID_IP',
      'ips',
      entry,
      "an IPv4 or IPv6 address or CIDR network such as '10.0.0.0/8'",
    )
  if (typeof entry !== 'string') throw bad()
  const slash = entry.indexOf('/')
  const address = slash < 0 ? entry.trim() : entry.slice(0, slash).trim()
  const family = isIP(address)
  if (family === 0) throw bad()
  const groups = new Uint16Array(8)
  if (!parseInto(address, groups)) throw bad()
  const full = family === 4 ? 32 : 128
  let length = full
  if (slash >= 0) {
    const text = entry.slice(slash + 1).trim()
    length = /^\d{1,3}$/.test(text) ? Number(text) : -1
    if (length < 0 || length > full) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_IP',
        `\`ips\`: ${describeValue(entry)} has a bad prefix length; expected 0 to ${full}.`,
        { option: 'ips' },
      )
    }
  }
  if (family === 4) length += 96
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

/**
 * Parses IPv4 or IPv6 text into eight 16-bit groups without allocating (IPv4 as IPv4-mapped); a zone id is
 * ignored. False for anything that is not an address.
 */
function parseInto(text: string, out: Uint16Array): boolean {
  let end = text.indexOf('%')
  if (end < 0) end = text.length
  if (text.indexOf(':') < 0) {
    out.fill(0, 0, 5)
    out[5] = 0xffff
    return parseIpv4(text, 0, end, out, 6)
  }
  let count = 0
  let gap = -1
  let i = 0
  if (text.charCodeAt(0) === 58 /* : */) {
    if (text.charCodeAt(1) !== 58) return false
    gap = 0
    i = 2
    if (i === end) {
      out.fill(0)
      return true
    }
  }
  while (i < end) {
    let value = 0
    let digits = 0
    const start = i
    while (i < end) {
      const code = text.charCodeAt(i)
      const digit =
        code >= 48 && code <= 57
          ? code - 48
          : code >= 97 && code <= 102
            ? code - 87
            : code >= 65 && code <= 70
              ? code - 55
              : -1
      if (digit < 0) break
      value = value * 16 + digit
      digits++
      i++
    }
    if (i < end && text.charCodeAt(i) === 46 /* . */) {
      if (count > 6) return false
      if (!parseIpv4(text, start, end, SCRATCH_V4, 0)) return false
      out[count++] = SCRATCH_V4[0]!
      out[count++] = SCRATCH_V4[1]!
      i = end
      break
    }
    if (digits === 0 || digits > 4 || count === 8) return false
    out[count++] = value
    if (i === end) break
    if (text.charCodeAt(i) !== 58) return false
    i++
    if (text.charCodeAt(i) === 58) {
      if (gap >= 0) return false
      gap = count
      i++
    } else if (i === end) return false
  }
  if (gap < 0) return count === 8
  if (count > 7) return false
  const tail = count - gap
  for (let j = 0; j < tail; j++) out[7 - j] = out[count - 1 - j]!
  out.fill(0, gap, 8 - tail)
  return true
}

const SCRATCH_V4 = new Uint16Array(2)

/** Dotted IPv4 between `start` and `end` into two groups at `out[at]`. */
function parseIpv4(text: string, start: number, end: number, out: Uint16Array, at: number): boolean {
  let octets = 0
  let value = 0
  let digits = 0
  let high = 0
  for (let i = start; i <= end; i++) {
    const code = i === end ? 46 : text.charCodeAt(i)
    if (code === 46) {
      if (digits === 0 || value > 255 || octets === 4) return false
      if (octets % 2 === 0) high = value
      else out[at + (octets >> 1)] = (high << 8) | value
      octets++
      value = 0
      digits = 0
    } else if (code >= 48 && code <= 57) {
      if (digits === 3) return false
      value = value * 10 + code - 48
      digits++
    } else return false
  }
  return octets === 4
}
