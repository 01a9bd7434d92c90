import { isIP, isIPv4 } from 'node:net'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { AccessList } from '../src/http/access-list.js'
import { IPV4, IPV6, IPV6_DOTTED, NOT_AN_IP, parseIp } from '../src/http/ip.js'
import { ipKey } from '../src/http/keys.js'

const kind = (text: string) => parseIp(text, new Uint16Array(8))
/** Node's answer in our terms: 4, 6, or 0. */
const nodeKind = (text: string) => isIP(text)
const ours = (text: string) => {
  const k = kind(text)
  return k === IPV6_DOTTED ? IPV6 : k
}

describe('parseIp: the one address grammar', () => {
  it("agrees with node:net's isIPv4 on valid, borderline and malformed IPv4", () => {
    const octets = [
      '0',
      '1',
      '9',
      '10',
      '99',
      '100',
      '199',
      '200',
      '249',
      '250',
      '255',
      '256',
      '299',
      '300',
      '999',
    ]
    const malformed = ['00', '01', '001', '010', '0255', '1000', '', ' 1', '1 ', '+1', '-1', 'a', '1a', '0x1']
    const samples = new Set<string>()
    for (const a of [...octets, ...malformed])
      for (const b of octets.slice(0, 6)) samples.add(`${a}.${b}.${b}.${a}`)
    for (const text of [
      '1.2.3',
      '1.2.3.4.5',
      '1..2.3',
      '.1.2.3',
      '1.2.3.',
      '255.255.255.255',
      '0.0.0.0',
      '١.٢.٣.٤',
    ])
      samples.add(text)
    let valid = 0
    for (const text of samples) {
      // Whitespace around an address is ignored (Node refuses it): compare on the trimmed text's verdict.
      expect([text, kind(text) === IPV4]).toEqual([text, isIPv4(text.trim())])
      if (isIPv4(text)) valid++
    }
    expect(valid).toBeGreaterThan(50)
    expect(samples.size - valid).toBeGreaterThan(100)
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9.]{0,17}$/), (text) => (kind(text) === IPV4) === isIPv4(text)),
      { numRuns: 20_000 },
    )
  })

  it("agrees with node:net's isIP on IPv6, with and without a dotted IPv4 or a zone id", () => {
    for (const text of [
      '::',
      '::1',
      '1::',
      '1:2:3:4:5:6:7:8',
      '1:2:3:4:5:6:7::',
      '::2:3:4:5:6:7:8',
      '1::2:3:4:5:6:7:8',
      '1:2:3:4:5:6:1.2.3.4',
      '1:2:3:4:5:6:7:1.2.3.4',
      '::ffff:1.2.3.4',
      '::ffff:01.2.3.4',
      '::1.2.3.4:5',
      'fe80::1%eth0',
      'fe80::1%',
      'fe80::1% x',
      '00000::1',
      '0::01234',
      ':::',
      '1::2::3',
      ':1::',
      '1:',
    ])
      expect([text, ours(text)]).toEqual([text, nodeKind(text)])
    fc.assert(
      fc.property(fc.ipV6(), (text) => ours(text) === IPV6),
      { numRuns: 5_000 },
    )
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9a-fA-F:.%]{0,24}$/), (text) => ours(text) === nodeKind(text)),
      { numRuns: 20_000 },
    )
  })

  it('tells a dotted IPv4 tail from hex groups', () => {
    expect(kind('::ffff:203.0.113.7')).toBe(IPV6_DOTTED)
    expect(kind('::ffff:cb00:7107')).toBe(IPV6)
    expect(kind('203.0.113.7')).toBe(IPV4)
    expect(kind('203.0.113.07')).toBe(NOT_AN_IP)
  })

  // Entries, lookups and ipKey read addresses alike: each accepts exactly what the others accept.
  const everyAddress = new AccessList({ ips: ['0.0.0.0/0', '::/0'] })
  const accepted = (text: string) => {
    const asKey = (() => {
      try {
        ipKey(text)
        return true
      } catch {
        return false
      }
    })()
    const asEntry = (() => {
      try {
        new AccessList({ ips: [text] })
        return true
      } catch {
        return false
      }
    })()
    return { key: asKey, entry: asEntry, lookup: everyAddress.hasIp(text) }
  }

  it.each([
    ['127.0.0.1', true],
    ['127.0.0.01', false],
    ['010.1.2.3', false],
    ['10.0.0.0', true],
    [' 10.0.0.1 ', true],
    ['10.0.0.1\n', true],
    ['10.0. 0.1', false],
    ['::ffff:127.0.0.1', true],
    ['::ffff:127.0.0.01', false],
    ['::ffff:cb00:7107', true],
    ['fe80::1%eth0', true],
    ['fe80::1%', false],
    ['2001:db8::1', true],
    ['2001:db8::g', false],
    ['1.2.3.4%eth0', false],
    ['', false],
  ])('%j: accepted (%s) alike by entries, lookups and ipKey', (text, valid) => {
    expect(accepted(text)).toEqual({ key: valid, entry: valid, lookup: valid })
  })

  it('entries, lookups and ipKey agree on any text', () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV6(), fc.stringMatching(/^[ 0-9a-f:.%]{0,20}$/)), (text) => {
        const { key, entry, lookup } = accepted(text)
        return key === entry && entry === lookup
      }),
      { numRuns: 5_000 },
    )
  })

  it.each([
    '10.0.0.0/ 8',
    '10.0.0.0 /8',
    '10.0.0.0/08',
    '10.0.0.0/8 8',
    '10.0.0.0/',
    '10.0.0.0/33',
    '::/08',
    '::/129',
    '::/ 8',
    '10.0.0.0/+8',
  ])('refuses the network %j (a prefix length is plain decimal, without leading zeros)', (entry) => {
    expect(() => new AccessList({ ips: [entry] })).toThrow(/ERR_RATEWINDOW_INVALID_IP|`ips`/)
  })

  it.each(['10.0.0.0/8', ' 10.0.0.0/8 ', '10.0.0.0/0', '::/0', '2001:db8::/32', '::ffff:10.0.0.0/104'])(
    'accepts the network %j',
    (entry) => {
      expect(() => new AccessList({ ips: [entry] })).not.toThrow()
    },
  )
})
