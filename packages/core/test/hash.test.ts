import { createHash, createHmac } from 'node:crypto'
import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'
import {
  clientKeyDigest,
  hmacSha256,
  pureSha256Base64url,
  sha1,
  sha1Hex,
  sha256,
  sha256Base64url,
  toBase64,
  toBase64url,
  toHex,
  utf8,
} from '../src/support/hash.js'

// Any string: ASCII, BMP, astral, lone surrogates (both encode them as U+FFFD), around every padding boundary.
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.string({ unit: 'grapheme-ascii', minLength: 50, maxLength: 140 }),
  fc.string({
    unit: fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)),
    maxLength: 80,
  }),
)
const bytes = fc.uint8Array({ maxLength: 300 })
const runs = { numRuns: 2_000 }

describe('core hashing is byte-identical to node:crypto', () => {
  it('utf8 encodes like Buffer.from(text, "utf8")', () => {
    fc.assert(
      fc.property(text, (value) => {
        expect(Buffer.from(utf8(value)).equals(Buffer.from(value, 'utf8'))).toBe(true)
      }),
      runs,
    )
  })

  it('sha256 of text, as RedisStore and SyncedStore key hashes (base64url, first 22), on both paths', () => {
    fc.assert(
      fc.property(text, (value) => {
        const node = createHash('sha256').update(value).digest('base64url')
        // The platform's hash (node:crypto through process.getBuiltinModule, as on Node here) …
        expect(sha256Base64url(value)).toBe(node)
        expect(sha256Base64url(value).slice(0, 22)).toBe(node.slice(0, 22))
        // … and the pure one, which Web-standard runtimes use.
        expect(pureSha256Base64url(value)).toBe(node)
      }),
      runs,
    )
  })

  it('sha256Base64url takes node:crypto where process.getBuiltinModule gives it, else the pure hash', async () => {
    const getBuiltinModule = process.getBuiltinModule
    /** A fresh copy of hash.ts (its lookup not made yet), loaded while `getBuiltinModule` is `stub`. */
    const freshHash = async (stub: ((id: string) => unknown) | undefined) => {
      vi.resetModules()
      ;(process as { getBuiltinModule?: unknown }).getBuiltinModule = stub
      try {
        const hash = await import('../src/support/hash.js')
        return hash.sha256Base64url('ratewindow ✓ \ud800')
      } finally {
        process.getBuiltinModule = getBuiltinModule
      }
    }
    const expected = createHash('sha256').update('ratewindow ✓ \ud800').digest('base64url')
    const asked: string[] = []
    const recording = (id: string) => {
      asked.push(id)
      return getBuiltinModule(id)
    }
    expect(await freshHash(recording)).toBe(expected)
    expect(asked).toEqual(['node:crypto'])
    // Where node:crypto has no one-shot `hash` (Node before 20.12), its `createHash`.
    const { createHash: only } = await import('node:crypto')
    expect(await freshHash((id) => (id === 'node:crypto' ? { createHash: only } : undefined))).toBe(expected)
    expect(await freshHash(undefined)).toBe(expected)
    expect(
      await freshHash(() => {
        throw new Error('no such module here')
      }),
    ).toBe(expected)
  })

  it('sha256 and sha1 of bytes, every length up to 300', () => {
    for (let length = 0; length <= 300; length++) {
      const input = new Uint8Array(length).map((_, i) => (i * 131 + length) & 0xff)
      expect(toHex(sha256(input))).toBe(createHash('sha256').update(input).digest('hex'))
      expect(toHex(sha1(input))).toBe(createHash('sha1').update(input).digest('hex'))
    }
    fc.assert(
      fc.property(bytes, (input) => {
        expect(toHex(sha256(input))).toBe(createHash('sha256').update(input).digest('hex'))
        expect(toHex(sha1(input))).toBe(createHash('sha1').update(input).digest('hex'))
      }),
      runs,
    )
  })

  it('sha1 hex of text, as the Lua script SHAs', () => {
    fc.assert(
      fc.property(text, (value) => {
        expect(sha1Hex(value)).toBe(createHash('sha1').update(value).digest('hex'))
      }),
      runs,
    )
  })

  it('hmac-sha256 under keys shorter and longer than a block, as partition keys', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 150 }), text, (secret, value) => {
        const ours = hmacSha256(secret, utf8(value))
        expect(toBase64(ours)).toBe(createHmac('sha256', secret).update(value).digest('base64'))
        expect(toBase64(ours.subarray(0, 12))).toBe(
          createHmac('sha256', secret).update(value).digest().subarray(0, 12).toString('base64'),
        )
      }),
      runs,
    )
  })

  it('base64 and base64url like Buffer', () => {
    fc.assert(
      fc.property(bytes, (input) => {
        expect(toBase64(input)).toBe(Buffer.from(input).toString('base64'))
        expect(toBase64url(input)).toBe(Buffer.from(input).toString('base64url'))
      }),
      runs,
    )
  })

  it('known vectors (FIPS 180-2)', () => {
    expect(toHex(sha256(utf8('abc')))).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    )
    expect(sha1Hex('abc')).toBe('a9993e364706816aba3e25717850c26c9cd0d89d')
    expect(toHex(sha256(new Uint8Array(1_000_000).fill(0x61)))).toBe(
      'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0',
    )
  })
})

describe('clientKeyDigest: one hash per client identifier (issue 32, attack round)', () => {
  it('is the SHA-256 of a well-formed identifier, as before (its Redis key unchanged)', () => {
    for (const key of ['user', '198.51.100.7', '2001:db8::/56', 'é', '😀', '#x', 'a'.repeat(300)])
      expect(clientKeyDigest(key)).toBe(createHash('sha256').update(key).digest('base64url'))
  })

  it('tells apart identifiers that UTF-8 would make one (lone surrogates as U+FFFD)', () => {
    const pairs = [
      ['user\uD800', 'user\uFFFD'],
      ['#\uD800', '#\uDBFF'],
      [`${'x'.repeat(200)}\uDC00`, `${'x'.repeat(200)}\uFFFD`],
      ['\u0000', ''],
    ]
    for (const [a, b] of pairs) expect(clientKeyDigest(a!)).not.toBe(clientKeyDigest(b!))
  })

  it('is one to one on any string (no two distinct identifiers share a hash, short of a SHA-256 collision)', () => {
    fc.assert(
      fc.property(text, text, (a, b) => a === b || clientKeyDigest(a) !== clientKeyDigest(b)),
      runs,
    )
  })
})
