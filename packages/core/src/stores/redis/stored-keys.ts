/**
 * RedisStore's key names read back (`<store prefix><namespace>{<hash>}:<suffix>`, see `RedisStore.keyFor`), for
 * tools that find state by scanning (`@ratewindow/cli`): the inverse of the names the store writes, in one place.
 */
import { clientKeyDigest } from '../../support/hash.js'
import { clusterSlot } from './cluster-slot.js'
import { RECORD_SUFFIX } from './override-lua.js'
import { literalPattern } from './override-scripts.js'
import { PENALTY_SUFFIX } from './send-group.js'

/** What a key of a RedisStore holds, by its suffix. */
export type StoredPart =
  | { kind: 'rule'; ruleId: string }
  | { kind: 'penalty' }
  | { kind: 'override' }
  | { kind: 'lease' }

/** A RedisStore key read back. */
export interface StoredKey {
  /** The Redis key as found. */
  key: string
  /** The limiter's namespace (or override scope) it lives under, without the store's prefix. */
  namespace: string
  /** The hash tag: the client key's hash, as `RedisStore` makes it (`storedHash`). */
  hash: string
  part: StoredPart
}

/** The lease key's suffix (`RedisStore.leaseKeyFor`). */
const LEASE_SUFFIX = 'cc'

/** The length of a hash tag (`storedHash`). */
const STORED_HASH_LENGTH = 22

/**
 * The hash tag RedisStore keeps a client key's state under: the base64url SHA-256 of the key (`clientKeyDigest`),
 * cut to 22 characters (132 bits). Hashing bounds key length and keeps braces of hostile keys out of the tag.
 */
export function storedHash(key: string): string {
  return clientKeyDigest(key).slice(0, STORED_HASH_LENGTH)
}

/** Client keys whose hash is kept (see `StoredHashes`), and the longest key kept: at most ~3 MB in all. */
const HASH_CACHE_SIZE = 16_384
const HASH_CACHE_KEY_LENGTH = 128

/** `storedHash` of the client keys seen lately, kept (one per RedisStore). */
export class StoredHashes {
  readonly #hashes = new Map<string, string>()

  /** The hash tag of a client key. */
  of(key: string): string {
    // PERF (issue 12): the sha256 of a client key was computed on every decision; a bounded cache of recent keys
    // saves it for the clients that come back (all of them, under load). Cleared whole when full: no per-hit
    // bookkeeping, and a flood of one-off keys costs one hash each, as before.
    // Long identifiers are hashed every time, so hostile keys cannot grow the cache past its bound in bytes.
    let hash = this.#hashes.get(key)
    if (hash === undefined) {
      hash = storedHash(key)
      if (key.length <= HASH_CACHE_KEY_LENGTH) {
        if (this.#hashes.size >= HASH_CACHE_SIZE) this.#hashes.clear()
        this.#hashes.set(key, hash)
      }
    }
    return hash
  }
}

/** The Cluster slot of every key of one hash tag: its counters, penalty, lease and override record. */
export function storedSlot(hash: string): number {
  return clusterSlot(`{${hash}}`)
}

/**
 * The RedisStore key `key` read back under the store prefix `storePrefix`, or undefined when it is not one the
 * store writes (another application's key, a SyncedStore's).
 */
export function decodeStoredKey(key: string, storePrefix = ''): StoredKey | undefined {
  if (!key.startsWith(storePrefix)) return undefined
  const open = key.indexOf('{', storePrefix.length)
  const close = open + 1 + STORED_HASH_LENGTH
  if (open <= storePrefix.length || key[close] !== '}' || key[close + 1] !== ':') return undefined
  const hash = key.slice(open + 1, close)
  if (!/^[A-Za-z0-9_-]+$/.test(hash)) return undefined
  const namespace = key.slice(storePrefix.length, open)
  const suffix = key.slice(close + 2)
  if (!namespace.endsWith(':') || suffix === '') return undefined
  return { key, namespace, hash, part: partOf(suffix) }
}

function partOf(suffix: string): StoredPart {
  if (suffix === RECORD_SUFFIX) return { kind: 'override' }
  if (suffix === PENALTY_SUFFIX) return { kind: 'penalty' }
  if (suffix === LEASE_SUFFIX) return { kind: 'lease' }
  return { kind: 'rule', ruleId: suffix }
}

/**
 * A SCAN MATCH pattern for the keys of a RedisStore under `storePrefix`: every one, or those of one hash tag
 * (one client key, in every limiter).
 */
export function storedKeyPattern(storePrefix = '', hash?: string): string {
  return `${literalPattern(storePrefix)}*{${hash === undefined ? '*' : literalPattern(hash)}}:*`
}
