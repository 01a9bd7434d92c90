import { describe, expect, it } from 'vitest'
import { forwardedClient, trustedProxies, trustsEveryAddress } from '../src/entries/adapter.js'
import { withoutPort } from '../src/http/forwarded-for.js'
import { ipKey } from '../src/http/keys.js'

describe('trustedProxies: `trustProxy` checked once, as a rule of trusted hops', () => {
  it('with a number n, trusts the first n hops (the peer is hop 0)', () => {
    const two = trustedProxies(2)
    expect([0, 1, 2].map((hop) => two('192.0.2.1', hop))).toEqual([true, true, false])
  })

  it('with addresses and networks, trusts the hops whose address they hold, at any hop', () => {
    const networks = trustedProxies(['10.0.0.0/8', '::1'])
    expect(networks('10.1.2.3', 5)).toBe(true)
    expect(networks('::1', 0)).toBe(true)
    expect(networks('192.0.2.1', 1)).toBe(false)
    expect(trustedProxies('127.0.0.1')('127.0.0.1', 3)).toBe(true)
  })

  it.each([
    [0, /`trustProxy` must be the number of proxies .*received 0/],
    [1.5, /received 1\.5/],
    [[], /a non-empty array of them/],
    [[1], /a non-empty array of them/],
    ['not-an-address', /^`trustProxy`: /],
    ['0.0.0.0/0', /trusts every address \(0\.0\.0\.0\/0\): any client could then choose its own key/],
  ])('refuses %j, naming `trustProxy`', (trustProxy, message) => {
    const parse = () => trustedProxies(trustProxy as never)
    expect(parse).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'trustProxy' }),
    )
    expect(parse).toThrow(message)
  })

  it('accepts a /0 network with allowEveryAddress (an adapter that warns of it), and says it trusts every address', () => {
    const everyone = trustedProxies(['0.0.0.0/0', '::/0'], { allowEveryAddress: true })
    expect(everyone('198.51.100.7', 9)).toBe(true)
    expect(trustsEveryAddress(['10.0.0.0/8', ' ::/0 '])).toBe(true)
    expect(trustsEveryAddress('10.0.0.0/8')).toBe(false)
    expect(trustsEveryAddress(1)).toBe(false)
    expect(trustsEveryAddress(undefined)).toBe(false)
  })
})

describe('forwardedClient: X-Forwarded-For read from the right, past the trusted hops', () => {
  it('is the first entry from the right the rule refuses, counting from hop 1', () => {
    const header = '203.0.113.9, 198.51.100.7, 10.0.0.2'
    expect(forwardedClient(header, trustedProxies(1))).toBe('10.0.0.2')
    expect(forwardedClient(header, trustedProxies(2))).toBe('198.51.100.7')
    expect(forwardedClient(header, trustedProxies('10.0.0.0/8'))).toBe('198.51.100.7')
  })

  it('is the leftmost entry when the rule trusts them all, and skips empty entries', () => {
    expect(forwardedClient('203.0.113.9, 198.51.100.7', trustedProxies(5))).toBe('203.0.113.9')
    expect(forwardedClient(' 203.0.113.9 ,, 10.0.0.2,', trustedProxies(2))).toBe('203.0.113.9')
  })

  it('is undefined without the header or without an entry in it', () => {
    expect(forwardedClient(null, trustedProxies(1))).toBeUndefined()
    expect(forwardedClient(undefined, trustedProxies(1))).toBeUndefined()
    expect(forwardedClient(' , ', trustedProxies(1))).toBeUndefined()
  })
})

describe('an entry with a port (issue 45): read as its address', () => {
  it('keys 203.0.113.7:51234 and [2001:db8::1]:443 as the addresses they carry', () => {
    expect(forwardedClient('198.51.100.1, 203.0.113.7:51234', trustedProxies(1))).toBe('203.0.113.7')
    expect(forwardedClient('[2001:db8::1]:443', trustedProxies(1))).toBe('2001:db8::1')
    expect(forwardedClient('[2001:db8::1]', trustedProxies(1))).toBe('2001:db8::1')
    expect(ipKey(forwardedClient('[2001:db8::1]:443', trustedProxies(1))!)).toBe('2001:db8::/56')
  })

  it('trusts a proxy whose entry carries a port, as its address', () => {
    const header = '203.0.113.7:51234, 10.0.0.2:8080'
    expect(forwardedClient(header, trustedProxies('10.0.0.0/8'))).toBe('203.0.113.7')
  })

  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['2001:db8::1', '2001:db8::1'],
    ['::ffff:203.0.113.7', '::ffff:203.0.113.7'],
    ['2001:db8::1:443', '2001:db8::1:443'],
    ['fe80::1%eth0', 'fe80::1%eth0'],
    ['203.0.113.7:', '203.0.113.7:'],
    ['203.0.113.7:123456', '203.0.113.7:123456'],
    ['203.0.113.7:80a', '203.0.113.7:80a'],
    ['[2001:db8::1]:', '[2001:db8::1]:'],
    ['[2001:db8::1]x', '[2001:db8::1]x'],
    ['[2001:db8::1', '[2001:db8::1'],
    ['unknown', 'unknown'],
    ['host:80', 'host:80'],
  ])('withoutPort(%j) is %j: only a port after an IPv4 or a bracketed address is cut', (entry, address) => {
    expect(withoutPort(entry)).toBe(address)
  })

  it('leaves an entry that is not an address as it is, for the key to refuse (never a shared bucket)', () => {
    const client = forwardedClient('unknown', trustedProxies(1))!
    expect(client).toBe('unknown')
    expect(() => ipKey(client)).toThrow(expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_IP' }))
    expect(() => ipKey(forwardedClient('[garbage]:1', trustedProxies(1))!)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_IP' }),
    )
  })
})
