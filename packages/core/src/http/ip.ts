/**
 * The one grammar of IP address text, shared by access-list entries, access-list lookups and `ipKey` (and by
 * nothing from `node:net`, so that it runs on every runtime):
 * - IPv4: four decimal octets from 0 to 255, without leading zeros (`127.0.0.1`; `127.0.0.01` and `010.1.2.3`
 *   are refused, never read as decimal or octal);
 * - IPv6 (RFC 4291): eight groups of 1 to 4 hex digits, `::` at most once for one or more zero groups, the last
 *   two groups optionally a dotted IPv4 of the same grammar (`::ffff:203.0.113.7`), then optionally a zone id
 *   (`%eth0`: letters, digits, `-`, `.`, `:`), which is ignored;
 * - whitespace around the address is ignored; none inside it.
 * An address is read into eight 16-bit groups; IPv4 as IPv4-mapped (`::ffff:a.b.c.d`).
 */

/** Not an address. */
export const NOT_AN_IP = 0
/** Dotted IPv4. */
export const IPV4 = 4
/** IPv6 written in hex groups only. */
export const IPV6 = 6
/** IPv6 whose last 32 bits are written as a dotted IPv4 (`::ffff:203.0.113.7`, `64:ff9b::198.51.100.9`). */
export const IPV6_DOTTED = 7

export type IpKind = typeof NOT_AN_IP | typeof IPV4 | typeof IPV6 | typeof IPV6_DOTTED

/** Space, tab, line feed, vertical tab, form feed, carriage return. */
export const isSpace = (code: number): boolean => code === 32 || (code >= 9 && code <= 13)

/**
 * The text `parseIp` read last, its kind and its groups: a request's address is read by the trust check (the
 * proxies' access list) and then by its key, one after the other; the second read copies the first's groups.
 */
let lastText: string | undefined
let lastKind: IpKind = NOT_AN_IP
const lastGroups = new Uint16Array(8)

/** `text` as an address into `out` (eight groups), whitespace around it ignored. */
export function parseIp(text: string, out: Uint16Array): IpKind {
  if (text === lastText) {
    for (let i = 0; i < 8; i++) out[i] = lastGroups[i]!
    return lastKind
  }
  let start = 0
  let end = text.length
  while (start < end && isSpace(text.charCodeAt(start))) start++
  while (end > start && isSpace(text.charCodeAt(end - 1))) end--
  const kind = parseIpBetween(text, start, end, out)
  // The groups as read: callers may change `out` afterwards (a key masks its subnet in place).
  for (let i = 0; i < 8; i++) lastGroups[i] = out[i]!
  lastText = text
  lastKind = kind
  return kind
}

/** The address that is exactly `text` from `start` to `end` (no whitespace allowed), into `out`. */
export function parseIpBetween(text: string, start: number, end: number, out: Uint16Array): IpKind {
  const colon = text.indexOf(':', start)
  if (colon < 0 || colon >= end) {
    zero(out, 0, 5)
    out[5] = 0xffff
    return parseIpv4(text, start, end, out, 6) ? IPV4 : NOT_AN_IP
  }
  // A zone id: at least one character, of letters, digits, '-', '.', ':'.
  const percent = text.indexOf('%', start)
  if (percent >= 0 && percent < end) {
    if (percent === end - 1) return NOT_AN_IP
    for (let i = percent + 1; i < end; i++) if (!isZoneCharacter(text.charCodeAt(i))) return NOT_AN_IP
    end = percent
  }
  let count = 0
  let gap = -1
  let dotted = false
  let i = start
  if (text.charCodeAt(i) === 58 /* : */) {
    if (i + 1 >= end || text.charCodeAt(i + 1) !== 58) return NOT_AN_IP
    gap = 0
    i += 2
    if (i === end) {
      zero(out, 0, 8)
      return IPV6
    }
  }
  while (i < end) {
    let value = 0
    let digits = 0
    const from = i
    while (i < end) {
      const digit = hexDigit(text.charCodeAt(i))
      if (digit < 0) break
      value = value * 16 + digit
      digits++
      i++
    }
    if (i < end && text.charCodeAt(i) === 46 /* . */) {
      // A dotted IPv4 ends the address, in the last two groups.
      if (count > 6 || !parseIpv4(text, from, end, out, count)) return NOT_AN_IP
      count += 2
      dotted = true
      break
    }
    if (digits === 0 || digits > 4 || count === 8) return NOT_AN_IP
    out[count++] = value
    if (i === end) break
    if (text.charCodeAt(i) !== 58) return NOT_AN_IP
    i++
    if (i < end && text.charCodeAt(i) === 58) {
      if (gap >= 0) return NOT_AN_IP
      gap = count
      i++
    } else if (i === end) return NOT_AN_IP
  }
  if (gap < 0) {
    if (count !== 8) return NOT_AN_IP
  } else {
    if (count > 7) return NOT_AN_IP
    const tail = count - gap
    for (let j = 0; j < tail; j++) out[7 - j] = out[count - 1 - j]!
    zero(out, gap, 8 - tail)
  }
  return dotted ? IPV6_DOTTED : IPV6
}

/**
 * Zeroes `out` from `from` to `to`.
 * NOTE: a loop, not `out.fill(0, from, to)`: the builtin call cost about half of parsing an IPv4 address.
 */
function zero(out: Uint16Array, from: number, to: number): void {
  for (let i = from; i < to; i++) out[i] = 0
}

const hexDigit = (code: number): number =>
  code >= 48 && code <= 57
    ? code - 48
    : code >= 97 && code <= 102
      ? code - 87
      : code >= 65 && code <= 70
        ? code - 55
        : -1

const isZoneCharacter = (code: number): boolean =>
  (code >= 48 && code <= 58) /* 0-9 : */ ||
  (code >= 65 && code <= 90) ||
  (code >= 97 && code <= 122) ||
  code === 45 /* - */ ||
  code === 46 /* . */

/** Dotted IPv4 exactly between `start` and `end` into two groups at `out[at]`: no leading zeros. */
function parseIpv4(text: string, start: number, end: number, out: Uint16Array, at: number): boolean {
  if (end - start < 7 || end - start > 15) return false
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
      // A leading zero is only valid as the whole octet.
      if (digits === 3 || (digits === 1 && value === 0)) return false
      value = value * 10 + code - 48
      digits++
    } else return false
  }
  return octets === 4
}

/** Whether the groups are an IPv4 address (IPv4-mapped, `::ffff:0:0/96`): how IPv4 is held, and dual-stack. */
export const isMappedIpv4 = (g: ArrayLike<number>): boolean =>
  g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff

/** The IPv4 address of the last two groups, as one unsigned 32-bit number. */
export const lowIpv4 = (g: ArrayLike<number>): number => ((g[6]! << 16) | g[7]!) >>> 0

/** Dotted text of an unsigned 32-bit IPv4 address. */
export const ipv4Text = (ip: number): string =>
  `${ip >>> 24}.${(ip >>> 16) & 0xff}.${(ip >>> 8) & 0xff}.${ip & 0xff}`

/** Whether the groups from `from` to `to` are all zero. */
export const zeros = (g: ArrayLike<number>, from: number, to: number): boolean => {
  for (let i = from; i < to; i++) if (g[i] !== 0) return false
  return true
}

/** An IPv6 block whose addresses carry an IPv4 client's address, and where. */
export interface Ipv4Carrier {
  /** The block, as docs/security.md writes it. */
  block: string
  matches(g: ArrayLike<number>): boolean
  /** The client's IPv4 address, as one unsigned 32-bit number. */
  ipv4(g: ArrayLike<number>): number
}

/**
 * IPv6 blocks that carry a client's IPv4 address: `ipKey` keys such a client by that IPv4, and an access list
 * matches it by that IPv4 too (besides its IPv6 address). IPv4-mapped first: it is the IPv4 client itself.
 */
export const IPV4_CARRIERS: readonly Ipv4Carrier[] = [
  // IPv4-mapped: an IPv4 client on a dual-stack socket.
  { block: '::ffff:0:0/96', matches: isMappedIpv4, ipv4: lowIpv4 },
  // IPv4-compatible (deprecated, RFC 4291): the low 32 bits are the IPv4 address; `::` and `::1` excepted
  // (unspecified and loopback, one host each).
  {
    block: '::/96',
    matches: (g) => zeros(g, 0, 6) && !(g[6] === 0 && g[7]! <= 1),
    ipv4: lowIpv4,
  },
  // NAT64 well-known prefix (RFC 6052): an IPv4 client translated; the low 32 bits are its address.
  {
    block: '64:ff9b::/96',
    matches: (g) => g[0] === 0x64 && g[1] === 0xff9b && zeros(g, 2, 6),
    ipv4: lowIpv4,
  },
  // 6to4 (RFC 3056): a site's /48 is 2002:<its IPv4>::/48.
  { block: '2002::/16', matches: (g) => g[0] === 0x2002, ipv4: (g) => ((g[1]! << 16) | g[2]!) >>> 0 },
  // Teredo (RFC 4380): the client's public IPv4 (its NAT's), stored inverted in the low 32 bits.
  { block: '2001::/32', matches: (g) => g[0] === 0x2001 && g[1] === 0, ipv4: (g) => ~lowIpv4(g) >>> 0 },
]

/** The IPv4 address an IPv6 address carries (IPV4_CARRIERS, IPv4-mapped included), or -1 for none. */
export function carriedIpv4(g: ArrayLike<number>): number {
  for (const carrier of IPV4_CARRIERS) if (carrier.matches(g)) return carrier.ipv4(g)
  return -1
}

/** RFC 5952: lowercase, no leading zeros, the longest run (>= 2) of zero groups as `::`, leftmost on ties. */
export function formatIpv6(groups: ArrayLike<number>): string {
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
  // Built by concatenation: no array per call (a client's IPv6 key is formatted at each cache miss).
  let text = ''
  for (let i = 0; i < 8; i++) {
    if (i === bestStart) {
      text += '::'
      i += bestLength - 1
    } else text += `${i === 0 || i === bestStart + bestLength ? '' : ':'}${groups[i]!.toString(16)}`
  }
  return text
}
