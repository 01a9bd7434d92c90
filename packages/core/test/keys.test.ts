import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ipKey, RateLimitError } from '../src/index.js'

describe('ipKey', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::FFFF:cb00:7107', '203.0.113.7'],
    ['2001:db8:abcd:12ff:1:2:3:4', '2001:db8:abcd:1200::/56'],
    ['2001:0DB8:ABCD:12FF::1', '2001:db8:abcd:1200::/56'],
    ['fe80::1%eth0', 'fe80::/56'],
    ['::1', '::/56'],
    ['  198.51.100.1 ', '198.51.100.1'],
  ])('%s → %s', (address, key) => {
    expect(ipKey(address)).toBe(key)
  })

  it('groups an IPv6 /56 into one key and separates neighbouring prefixes', () => {
    expect(ipKey('2001:db8:0:1ff::1')).toBe(ipKey('2001:db8:0:100:ffff::9'))
    expect(ipKey('2001:db8:0:200::1')).not.toBe(ipKey('2001:db8:0:100::1'))
  })

  it('takes other prefixes, or none', () => {
    expect(ipKey('2001:db8:abcd:12ff:1:2:3:4', { ipv6Subnet: 64 })).toBe('2001:db8:abcd:12ff::/64')
    expect(ipKey('2001:db8:abcd:12ff:1:2:3:4', { ipv6Subnet: 48 })).toBe('2001:db8:abcd::/48')
    expect(ipKey('2001:db8:abcd:12ff:0:0:3:4', { ipv6Subnet: false })).toBe('2001:db8:abcd:12ff::3:4')
    expect(ipKey('2001:db8::1:0:0:1', { ipv6Subnet: 128 })).toBe('2001:db8::1:0:0:1/128')
    expect(() => ipKey('::1', { ipv6Subnet: 129 })).toThrow(/`ipv6Subnet`/)
  })

  it.each(['', 'localhost', '1.2.3', '999.1.1.1', '::g', 'not an ip', '1.2.3.4.5'])(
    'rejects %j',
    (address) => {
      expect(() => ipKey(address)).toThrow(RateLimitError)
    },
  )

  it('never throws anything but a RateLimitError, and masks to the prefix', () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV6(), fc.ipV4(), fc.string()), (address) => {
        try {
          const key = ipKey(address)
          if (key.includes(':')) expect(key).toMatch(/\/56$/)
        } catch (error) {
          expect(error).toBeInstanceOf(RateLimitError)
        }
      }),
      { numRuns: 2000 },
    )
  })
})
