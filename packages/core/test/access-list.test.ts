import { describe, expect, it } from 'vitest'
import { AccessList } from '../src/http/access-list.js'
import { RateLimitError } from '../src/support/errors.js'

describe('AccessList', () => {
  it('matches IPv4 addresses and networks, also written IPv4-mapped', () => {
    const list = new AccessList({ ips: ['10.0.0.0/8', '203.0.113.7', '192.0.2.128/25'] })
    expect(list.hasIp('10.200.3.4')).toBe(true)
    expect(list.hasIp('11.0.0.0')).toBe(false)
    expect(list.hasIp('9.255.255.255')).toBe(false)
    expect(list.hasIp('203.0.113.7')).toBe(true)
    expect(list.hasIp('203.0.113.8')).toBe(false)
    expect(list.hasIp('192.0.2.200')).toBe(true)
    expect(list.hasIp('192.0.2.127')).toBe(false)
    expect(list.hasIp('::ffff:10.1.2.3')).toBe(true)
    expect(list.hasIp('::FFFF:203.0.113.7')).toBe(true)
    expect(list.hasIp('::ffff:cb00:7107')).toBe(true)
  })

  it('matches IPv6 networks, zone ids ignored, and the IPv4 an IPv6 address carries', () => {
    const list = new AccessList({ ips: ['2001:db8:bad::/48', 'fe80::1', '198.51.100.0/24'] })
    expect(list.hasIp('2001:db8:bad:ffff::1')).toBe(true)
    expect(list.hasIp('2001:db8:bae::1')).toBe(false)
    expect(list.hasIp('2001:DB8:BAD:0:0:0:0:9')).toBe(true)
    expect(list.hasIp('fe80::1%eth0')).toBe(true)
    expect(list.hasIp('fe80::2')).toBe(false)
    expect(list.hasIp('64:ff9b::198.51.100.9')).toBe(true) // NAT64
    expect(list.hasIp('::198.51.100.9')).toBe(true) // IPv4-compatible
    expect(list.hasIp('2002:c633:6409::1')).toBe(true) // 6to4 of 198.51.100.9
    expect(list.hasIp('2001:0:4136:e378:8000:63bf:39cc:9bf6')).toBe(true) // Teredo of 198.51.100.9
    expect(list.hasIp('::1')).toBe(false)
    expect(list.hasIp('::')).toBe(false)
  })

  it('merges overlapping networks and matches the whole address space for /0', () => {
    const list = new AccessList({ ips: ['10.0.0.0/16', '10.0.0.0/8', '10.1.2.0/24'] })
    expect(list.hasIp('10.128.0.1')).toBe(true)
    expect(new AccessList({ ips: ['::/0'] }).hasIp('2001:db8::1')).toBe(true)
    expect(new AccessList({ ips: ['0.0.0.0/0'] }).hasIp('2001:db8::1')).toBe(false)
  })

  it('is false for text that is not an address', () => {
    const list = new AccessList({ ips: ['::/0'] })
    for (const text of [
      '',
      'x',
      '1.2.3',
      '1.2.3.4.5',
      '256.1.1.1',
      '1:2',
      ':::',
      '1::2::3',
      '12345::',
      '1:2:3:4:5:6:7:8:9',
    ])
      expect(list.hasIp(text)).toBe(false)
    expect(list.hasIp(undefined)).toBe(false)
  })

  it('matches keys and reloads at run time; a bad reload keeps the old entries', () => {
    const list = new AccessList({ keys: ['key-a'] })
    expect(list.hasKey('key-a')).toBe(true)
    list.set({ keys: ['key-b'], ips: ['203.0.113.0/24'] })
    expect(list.hasKey('key-a')).toBe(false)
    expect(list.hasKey('key-b')).toBe(true)
    expect(list.hasIp('203.0.113.1')).toBe(true)
    expect(() => list.set({ ips: ['203.0.113.0/33'] })).toThrow(RateLimitError)
    expect(() => list.set({ ips: ['not an ip'] })).toThrow(/ERR_RATEWINDOW_INVALID_IP|not an ip/)
    expect(() => list.set({ ip: [] } as never)).toThrow(/`ips` and `keys`/)
    expect(list.hasIp('203.0.113.1')).toBe(true)
  })
})

describe('AccessList: IPv4 and IPv6 entries apart', () => {
  it.each(['::/8', '::ffff:0:0/96', '::/3', '::/0', '::/96', '::ffff:0.0.0.0/95'])(
    '%s matches IPv6 clients only, never an IPv4 client (also on a dual-stack socket)',
    (entry) => {
      const list = new AccessList({ ips: [entry] })
      for (const client of ['203.0.113.7', '::ffff:203.0.113.7', '::FFFF:cb00:7107', '0.0.0.1', '10.0.0.1'])
        expect([client, list.hasIp(client)]).toEqual([client, false])
    },
  )

  it('IPv6 entries match the IPv6 clients they cover', () => {
    expect(new AccessList({ ips: ['::/8'] }).hasIp('::1')).toBe(true)
    expect(new AccessList({ ips: ['::/3'] }).hasIp('1fff::1')).toBe(true)
    expect(new AccessList({ ips: ['::/3'] }).hasIp('2001:db8::1')).toBe(false)
    expect(new AccessList({ ips: ['::/0'] }).hasIp('2001:db8::1')).toBe(true)
    // An IPv6 client carrying an IPv4 (here IPv4-compatible) is an IPv6 client too.
    expect(new AccessList({ ips: ['::/8'] }).hasIp('::203.0.113.7')).toBe(true)
  })

  it('a network inside the IPv4-mapped block is that IPv4 network; the block itself only written dotted', () => {
    const list = new AccessList({ ips: ['::ffff:203.0.113.0/120', '::ffff:198.51.100.7'] })
    expect(list.hasIp('203.0.113.9')).toBe(true)
    expect(list.hasIp('::ffff:203.0.113.200')).toBe(true)
    expect(list.hasIp('203.0.114.1')).toBe(false)
    expect(list.hasIp('198.51.100.7')).toBe(true)
    expect(list.hasIp('198.51.100.8')).toBe(false)
    // NAT64 of 203.0.113.9: the IPv4 it carries is listed.
    expect(list.hasIp('64:ff9b::203.0.113.9')).toBe(true)
    expect(new AccessList({ ips: ['::ffff:0.0.0.0/96'] }).hasIp('192.0.2.1')).toBe(true)
    // Written in hex, the same networks.
    const hex = new AccessList({ ips: ['::ffff:cb00:7100/120', '::ffff:c633:6407'] })
    expect(['203.0.113.9', '198.51.100.7', '203.0.114.1'].map((ip) => hex.hasIp(ip))).toEqual([
      true,
      true,
      false,
    ])
  })

  it('IPv4 entries still match IPv4 clients in every form, and never a plain IPv6 client', () => {
    const list = new AccessList({ ips: ['0.0.0.0/0'] })
    expect(list.hasIp('192.0.2.1')).toBe(true)
    expect(list.hasIp('::ffff:192.0.2.1')).toBe(true)
    expect(list.hasIp('2002:c000:201::1')).toBe(true) // 6to4 of 192.0.2.1
    expect(list.hasIp('2001:db8::1')).toBe(false)
  })
})
