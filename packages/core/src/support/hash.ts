/**
 * SHA-256, HMAC-SHA256 and SHA-1, synchronous and on plain JavaScript, so that core loads on any runtime (Node,
 * Bun, Deno, Cloudflare Workers without `nodejs_compat`) and keeps zero dependencies. Web Crypto's `digest` is
 * asynchronous, which would cost a promise on every keyed decision. The output is byte for byte what
 * `node:crypto` gives for the same text (UTF-8, lone surrogates as U+FFFD), so Redis keys and script SHAs do not
 * change on upgrade (test/hash.test.ts compares them on random inputs).
 */

const encoder = new TextEncoder()

/** The UTF-8 bytes of `text`, as `Buffer.from(text, 'utf8')` gives them. */
export function utf8(text: string): Uint8Array {
  const length = text.length
  // ASCII, the usual key: no encoder call.
  if (length <= 64) {
    const bytes = new Uint8Array(length)
    for (let i = 0; i < length; i++) {
      const code = text.charCodeAt(i)
      if (code > 0x7f) return encoder.encode(text)
      bytes[i] = code
    }
    return bytes
  }
  return encoder.encode(text)
}

const K256 = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
])
const H256 = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
/** The message schedule, reused: hashing is synchronous, so one buffer serves every call. */
const W = new Int32Array(80)

/** `bytes` with the Merkle–Damgård padding (0x80, zeros, the bit length big-endian), a multiple of 64 bytes. */
function padded(bytes: Uint8Array): DataView {
  const length = bytes.length
  const total = (((length + 8) >>> 6) + 1) << 6
  const block = new Uint8Array(total)
  block.set(bytes)
  block[length] = 0x80
  const view = new DataView(block.buffer)
  // Bit length: at most 2^53 bits in practice; the high word holds what does not fit in 32 bits.
  view.setUint32(total - 8, Math.floor(length / 0x20000000), false)
  view.setUint32(total - 4, (length << 3) >>> 0, false)
  return view
}

/** The last block(s) of a message: its rest, the padding and the bit length (reused: hashing is synchronous). */
const TAIL = new Uint8Array(128)

/** SHA-256's compression of the 64-byte block of `bytes` at `offset` into `state`. */
function compress256(state: Int32Array, bytes: Uint8Array, offset: number): void {
  for (let t = 0; t < 16; t++, offset += 4)
    W[t] =
      (bytes[offset]! << 24) | (bytes[offset + 1]! << 16) | (bytes[offset + 2]! << 8) | bytes[offset + 3]!
  for (let t = 16; t < 64; t++) {
    const w15 = W[t - 15]!
    const w2 = W[t - 2]!
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3)
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10)
    W[t] = (W[t - 16]! + s0 + W[t - 7]! + s1) | 0
  }
  let a = state[0]!
  let b = state[1]!
  let c = state[2]!
  let d = state[3]!
  let e = state[4]!
  let f = state[5]!
  let g = state[6]!
  let h = state[7]!
  for (let t = 0; t < 64; t++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))
    const ch = (e & f) ^ (~e & g)
    const t1 = (h + S1 + ch + K256[t]! + W[t]!) | 0
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))
    const maj = (a & b) ^ (a & c) ^ (b & c)
    const t2 = (S0 + maj) | 0
    h = g
    g = f
    f = e
    e = (d + t1) | 0
    d = c
    c = b
    b = a
    a = (t1 + t2) | 0
  }
  state[0] = (state[0]! + a) | 0
  state[1] = (state[1]! + b) | 0
  state[2] = (state[2]! + c) | 0
  state[3] = (state[3]! + d) | 0
  state[4] = (state[4]! + e) | 0
  state[5] = (state[5]! + f) | 0
  state[6] = (state[6]! + g) | 0
  state[7] = (state[7]! + h) | 0
}

/**
 * Finishes a SHA-256 whose first `before` bytes (a multiple of 64) are already compressed into `state`: the
 * rest of the message is `bytes`. Returns the digest; `state` is spent.
 */
function finish256(state: Int32Array, bytes: Uint8Array, before: number): Uint8Array {
  const length = bytes.length
  let offset = 0
  for (; offset + 64 <= length; offset += 64) compress256(state, bytes, offset)
  const rest = length - offset
  const tail = rest + 9 <= 64 ? 64 : 128
  TAIL.fill(0, 0, tail)
  TAIL.set(bytes.subarray(offset), 0)
  TAIL[rest] = 0x80
  const bits = (before + length) * 8
  const high = Math.floor(bits / 0x100000000)
  const low = bits >>> 0
  TAIL[tail - 8] = high >>> 24
  TAIL[tail - 7] = high >>> 16
  TAIL[tail - 6] = high >>> 8
  TAIL[tail - 5] = high
  TAIL[tail - 4] = low >>> 24
  TAIL[tail - 3] = low >>> 16
  TAIL[tail - 2] = low >>> 8
  TAIL[tail - 1] = low
  compress256(state, TAIL, 0)
  if (tail === 128) compress256(state, TAIL, 64)
  return wordsToBytes(state)
}

/** SHA-256 of `bytes` (FIPS 180-4). */
export function sha256(bytes: Uint8Array): Uint8Array {
  return finish256(Int32Array.from(H256), bytes, 0)
}

/** SHA-1 of `bytes` (FIPS 180-4): what Redis names a script by (`EVALSHA`), not used for anything secret. */
export function sha1(bytes: Uint8Array): Uint8Array {
  const view = padded(bytes)
  let h0 = 0x67452301
  let h1 = 0xefcdab89 | 0
  let h2 = 0x98badcfe | 0
  let h3 = 0x10325476
  let h4 = 0xc3d2e1f0 | 0
  for (let offset = 0; offset < view.byteLength; offset += 64) {
    for (let t = 0; t < 16; t++) W[t] = view.getInt32(offset + t * 4, false)
    for (let t = 16; t < 80; t++) {
      const x = W[t - 3]! ^ W[t - 8]! ^ W[t - 14]! ^ W[t - 16]!
      W[t] = (x << 1) | (x >>> 31)
    }
    let a = h0
    let b = h1
    let c = h2
    let d = h3
    let e = h4
    for (let t = 0; t < 80; t++) {
      let f: number
      let k: number
      if (t < 20) {
        f = (b & c) | (~b & d)
        k = 0x5a827999
      } else if (t < 40) {
        f = b ^ c ^ d
        k = 0x6ed9eba1
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d)
        k = 0x8f1bbcdc | 0
      } else {
        f = b ^ c ^ d
        k = 0xca62c1d6 | 0
      }
      const temp = (((a << 5) | (a >>> 27)) + f + e + k + W[t]!) | 0
      e = d
      d = c
      c = (b << 30) | (b >>> 2)
      b = a
      a = temp
    }
    h0 = (h0 + a) | 0
    h1 = (h1 + b) | 0
    h2 = (h2 + c) | 0
    h3 = (h3 + d) | 0
    h4 = (h4 + e) | 0
  }
  return wordsToBytes([h0, h1, h2, h3, h4])
}

/** Per secret: the SHA-256 states after its inner and outer padded key blocks (a server has one or two). */
const PADS = new Map<string, { inner: Int32Array; outer: Int32Array }>()

/**
 * HMAC-SHA256 (RFC 2104) of `message` under `secret` (its UTF-8 bytes, as `createHmac('sha256', secret)` takes
 * a string). The padded key blocks are compressed once per secret, so each call costs the message's blocks and
 * one more.
 */
export function hmacSha256(secret: string, message: Uint8Array): Uint8Array {
  let pads = PADS.get(secret)
  if (pads === undefined) {
    const key = utf8(secret)
    const block = new Uint8Array(64)
    block.set(key.length > 64 ? sha256(key) : key)
    const inner = Int32Array.from(H256)
    const outer = Int32Array.from(H256)
    compress256(
      inner,
      block.map((byte) => byte ^ 0x36),
      0,
    )
    compress256(
      outer,
      block.map((byte) => byte ^ 0x5c),
      0,
    )
    if (PADS.size >= 16) PADS.clear()
    pads = { inner, outer }
    PADS.set(secret, pads)
  }
  const innerDigest = finish256(pads.inner.slice(), message, 64)
  return finish256(pads.outer.slice(), innerDigest, 64)
}

function wordsToBytes(words: ArrayLike<number>): Uint8Array {
  const bytes = new Uint8Array(words.length * 4)
  const view = new DataView(bytes.buffer)
  for (let i = 0; i < words.length; i++) view.setInt32(i * 4, words[i]!, false)
  return bytes
}

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'))
const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/** Lowercase hex, as `digest('hex')`. */
export function toHex(bytes: Uint8Array): string {
  let text = ''
  for (const byte of bytes) text += HEX[byte]
  return text
}

/** Base64 with padding, as `digest('base64')`. */
export function toBase64(bytes: Uint8Array): string {
  return encode64(bytes, BASE64, true)
}

/** Base64url without padding, as `digest('base64url')`. */
export function toBase64url(bytes: Uint8Array): string {
  return encode64(bytes, BASE64URL, false)
}

function encode64(bytes: Uint8Array, alphabet: string, pad: boolean): string {
  let text = ''
  let i = 0
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
    text += alphabet[n >>> 18]! + alphabet[(n >>> 12) & 63]! + alphabet[(n >>> 6) & 63]! + alphabet[n & 63]!
  }
  const rest = bytes.length - i
  if (rest === 1) {
    const n = bytes[i]! << 16
    text += alphabet[n >>> 18]! + alphabet[(n >>> 12) & 63]! + (pad ? '==' : '')
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8)
    text += alphabet[n >>> 18]! + alphabet[(n >>> 12) & 63]! + alphabet[(n >>> 6) & 63]! + (pad ? '=' : '')
  }
  return text
}

/**
 * `createHash('sha256').update(text).digest('base64url')`: the platform's own where it has one (`node:crypto`,
 * faster than the pure one for short keys; its one-shot `hash` where there is one, a third of `createHash`'s time
 * for a key), else the pure one; all give the same bytes (test/hash.test.ts).
 */
export function sha256Base64url(text: string): string {
  const platform = platformHash()
  return platform === undefined ? pureSha256Base64url(text) : platform(text)
}

/** @internal `sha256Base64url` on the pure implementation, whatever the platform has. */
export const pureSha256Base64url = (text: string): string => toBase64url(sha256(utf8(text)))

/** What `node:crypto` offers for a SHA-256: the one-shot `hash` (Node 20.12, 21.7 and later), and `createHash`. */
interface NodeCrypto {
  hash?: unknown
  createHash?: unknown
}
type OneShot = (algorithm: 'sha256', text: string, encoding: 'base64url') => string
type CreateHash = (algorithm: 'sha256') => {
  update(text: string, encoding: 'utf8'): { digest(encoding: 'base64url'): string }
}

/** The platform's SHA-256 of a text as base64url, once looked up: a function, or null where there is none. */
let platformFound: ((text: string) => string) | null | undefined

/**
 * The synchronous SHA-256 of `node:crypto`, where `process.getBuiltinModule` gives it (Node 20.16 and later,
 * Bun, Deno): asked at the first hash, never at load, and without a static `node:` import, so that core still
 * loads on Web-standard runtimes (Workers without `nodejs_compat`), which get undefined.
 */
function platformHash(): ((text: string) => string) | undefined {
  if (platformFound === undefined) {
    const host = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process
    let crypto: NodeCrypto | undefined
    try {
      crypto = host?.getBuiltinModule?.('node:crypto') as NodeCrypto | undefined
    } catch {
      crypto = undefined
    }
    const { hash, createHash } = crypto ?? {}
    platformFound =
      typeof hash === 'function'
        ? (text) => (hash as OneShot)('sha256', text, 'base64url')
        : typeof createHash === 'function'
          ? (text) => (createHash as CreateHash)('sha256').update(text, 'utf8').digest('base64url')
          : null
  }
  return platformFound ?? undefined
}

/** `createHash('sha1').update(text).digest('hex')`: a Redis script's SHA. */
export const sha1Hex = (text: string): string => toHex(sha1(utf8(text)))

/** A code unit of a UTF-16 surrogate pair, whichever half. */
const SURROGATE = /[\uD800-\uDFFF]/

/**
 * The SHA-256 (base64url) of a client identifier, one to one: UTF-8 turns a lone surrogate into U+FFFD, so
 * `'user\uD800'` and `'user\uFFFD'` had one hash and shared a counter. An identifier
 * that is not well-formed UTF-16, or that starts with U+0000, is hashed as U+0000 followed by its code units in
 * hex; every other identifier as it is, so its hash (its Redis key) is unchanged.
 */
export function clientKeyDigest(key: string): string {
  if (key.charCodeAt(0) !== 0 && !(SURROGATE.test(key) && !isWellFormed(key))) return sha256Base64url(key)
  let escaped = '\u0000'
  for (let i = 0; i < key.length; i++) escaped += key.charCodeAt(i).toString(16).padStart(4, '0')
  return sha256Base64url(escaped)
}

/** `String.prototype.isWellFormed` (ES2024), where the runtime lacks it: no lone surrogate. */
export function isWellFormed(text: string): boolean {
  const native = (text as { isWellFormed?: () => boolean }).isWellFormed
  if (typeof native === 'function') return native.call(text)
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) i++
      else return false
    } else if (code >= 0xdc00 && code <= 0xdfff) return false
  }
  return true
}
