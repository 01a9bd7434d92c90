import { readFileSync } from 'node:fs'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { IpKeys, SPECIAL_BLOCKS } from '../src/http/keys.js'
import { ipKey, RateLimitError } from '../src/index.js'

describe('ipKey', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::FFFF:cb00:7107', '203.0.113.7'],
    ['2001:db8:abcd:12ff:1:2:3:4', '2001:db8:abcd:1200::/56'],
    ['2001:0DB8:ABCD:12FF::1', '2001:db8:abcd:1200::/56'],
    ['fe80::1%eth0', 'fe80::1'],
    ['::1', '::1'],
    ['  198.51.100.1 ', '198.51.100.1'],
  ])('%s → %s', (address, key) => {
    expect(ipKey(address)).toBe(key)
  })

  describe('blocks that are not one subscriber', () => {
    it.each([
      // IPv4 embedded: keyed by that IPv4, the same bucket as the client's IPv4 self.
      ['NAT64 64:ff9b::/96', '64:ff9b::203.0.113.7', '203.0.113.7'],
      ['NAT64, hex form', '64:ff9b::cb00:7107', '203.0.113.7'],
      ['6to4 2002::/16', '2002:cb00:7107:12::1', '203.0.113.7'],
      ['6to4, another host of the site', '2002:cb00:7107:ffff:1:2:3:4', '203.0.113.7'],
      ['Teredo 2001::/32 (RFC 4380 example)', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '192.0.2.45'],
      ['IPv4-compatible ::/96', '::203.0.113.7', '203.0.113.7'],
      ['IPv4-mapped', '::ffff:198.51.100.9', '198.51.100.9'],
      // One key per address where the address is the host.
      ['local-use NAT64 64:ff9b:1::/48', '64:ff9b:1:cb00:71:700::', '64:ff9b:1:cb00:71:700::'],
      ['link-local fe80::/10', 'fe80::abcd:1%en0', 'fe80::abcd:1'],
      ['link-local, upper part of /10', 'febf::1', 'febf::1'],
      ['loopback', '::1', '::1'],
      ['unspecified', '::', '::'],
      // Not special: grouped by ipv6Subnet like any subscriber.
      ['unique local fc00::/7', 'fd12:3456:789a:1::1', 'fd12:3456:789a::/56'],
      ['documentation 2001:db8::/32', '2001:db8:1:2::3', '2001:db8:1::/56'],
      ['2001:1::/32 is not Teredo', '2001:1:2:3::1', '2001:1:2::/56'],
    ])('%s: %s → %s', (_, address, key) => {
      expect(ipKey(address)).toBe(key)
      // Special keys do not depend on the subnet option.
      if (!key.includes('/')) expect(ipKey(address, { ipv6Subnet: false })).toBe(key)
    })

    it('NAT64, 6to4 and Teredo clients no longer share one bucket per block', () => {
      const keys = (addresses: string[]) => new Set(addresses.map((address) => ipKey(address)))
      expect(keys(['64:ff9b::1.2.3.4', '64:ff9b::5.6.7.8', '64:ff9b::9.9.9.9']).size).toBe(3)
      expect(keys(['2002:102:304::1', '2002:506:708::1']).size).toBe(2)
      expect(
        keys(['2001:0:4136:e378:8000:63bf:fefd:fcfb', '2001:0:4136:e378:8000:63bf:fafa:f9f8']).size,
      ).toBe(2)
      expect(keys(['fe80::1', 'fe80::2']).size).toBe(2)
    })

    it('docs/security.md lists every special block', () => {
      const doc = readFileSync(new URL('../../../docs/security.md', import.meta.url), 'utf8')
      for (const { block } of SPECIAL_BLOCKS)
        for (const part of block.split(', ')) expect(doc).toContain(`\`${part}\``)
    })
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
          // Grouped by the prefix, or one of the special blocks' own keys (an IPv4 or a whole address).
          if (key.includes('/')) expect(key).toMatch(/\/56$/)
          else if (key.includes(':')) expect(key).toMatch(/^(::1?|fe[89ab][0-9a-f]:.*|64:ff9b:1:.*)$/)
        } catch (error) {
          expect(error).toBeInstanceOf(RateLimitError)
        }
      }),
      { numRuns: 2000 },
    )
  })
})

describe('IpKeys (a middleware’s keys, recent IPv6 keys remembered)', () => {
  /** The key, or the error's code. */
  const keyOrCode = (key: () => string) => {
    try {
      return key()
    } catch (error) {
      return (error as RateLimitError).code
    }
  }

  it('gives what ipKey gives, for every subnet, asked once or again (bad addresses are never remembered)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.ipV6(), fc.ipV4(), fc.ipV4Extended(), fc.string()), { maxLength: 20 }),
        fc.oneof(fc.integer({ min: 1, max: 128 }), fc.constant(false as const)),
        (addresses, ipv6Subnet) => {
          const keys = new IpKeys(ipv6Subnet)
          for (const address of [...addresses, ...addresses]) {
            expect(keyOrCode(() => keys.of(address))).toBe(keyOrCode(() => ipKey(address, { ipv6Subnet })))
          }
        },
      ),
      { numRuns: 500 },
    )
  })

  it('keys an address with a long zone id as ipKey does (such texts are not remembered)', () => {
    const keys = new IpKeys(56)
    const address = `fe80::1%${'a'.repeat(10_000)}`
    expect(keys.of(address)).toBe('fe80::1')
    expect(keys.of(address)).toBe(ipKey(address))
  })

  it('stays exact past its bound of remembered keys', () => {
    const keys = new IpKeys(56)
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 10_000; i++) {
        const address = `2001:db8:${(i >> 8).toString(16)}:${(i & 255).toString(16)}00::${i}`
        expect(keys.of(address)).toBe(ipKey(address))
      }
    }
  })
})
