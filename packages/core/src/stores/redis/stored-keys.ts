/**
 * RedisStore's key names read back (`<store prefix><namespace>{<hash>}:<suffix>`, see `RedisStore.keyFor`), for
 * tools that find state by scanning (`scanStored`, `topStored`, `@ratewindow/cli`): the inverse of the names the store
 * writes, in one place; and the scan itself (`RedisStore.scanStored`).
 */
import { clientKeyDigest } from '../../support/hash.js'
import type { StoredKey, StoredKeyPage, StoredPart } from '../types.js'
import type { RedisScriptRunner } from './clients/index.js'
import { clusterSlot } from './cluster-slot.js'
import type { LoadedScripts } from './loaded-scripts.js'
import { scanStep } from './master-scan.js'
import { RECORD_SUFFIX } from './override-lua.js'
import { literalPattern } from './override-scripts.js'
import { PLAN_SUFFIX } from './plan-lua.js'
import { scriptOf } from './script.js'
import { PENALTY_SUFFIX } from './send-group.js'

export type { StoredKey, StoredPart }

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

/**
 * Slots of the hash cache (see `StoredHashes`, a power of 2), and the longest key kept: at most ~2 MB of keys in
 * all, and two arrays of 8,192 references, made at the first decision.
 */
const HASH_CACHE_SLOTS = 8_192
const HASH_CACHE_KEY_LENGTH = 128

/**
 * `storedHash` of the client keys seen lately, kept (one per RedisStore). PERF: the SHA-256 of a client key was
 * computed on every decision; the clients that come back (all of them, under load) find theirs here. A key has one
 * slot, picked by a cheap hash of its text (FNV-1a), and takes it from whichever key held it: nothing grows, is
 * cleared or rehashed, where a `Map` cleared when full spent as long on a new key as the SHA-256 itself. Keys that
 * share a slot only recompute their hashes. Long keys are hashed every time, so that hostile keys cannot make the
 * cache large in bytes.
 */
export class StoredHashes {
  #keys: (string | undefined)[] = []
  #hashes: string[] = []

  /** The hash tag of a client key. */
  of(key: string): string {
    const length = key.length
    if (length > HASH_CACHE_KEY_LENGTH) return storedHash(key)
    let h = 0x811c9dc5
    for (let i = 0; i < length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
    const slot = h & (HASH_CACHE_SLOTS - 1)
    if (this.#keys.length === 0) {
      this.#keys = new Array<string | undefined>(HASH_CACHE_SLOTS).fill(undefined)
      this.#hashes = new Array<string>(HASH_CACHE_SLOTS).fill('')
    }
    const keys = this.#keys
    const hashes = this.#hashes
    if (keys[slot] === key) return hashes[slot]!
    const hash = storedHash(key)
    keys[slot] = key
    hashes[slot] = hash
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
  if (suffix === PLAN_SUFFIX) return { kind: 'plan' }
  return { kind: 'rule', ruleId: suffix }
}

/**
 * A SCAN MATCH pattern for the keys of a RedisStore under `storePrefix`: every one, or those of one hash tag
 * (one client key, in every limiter).
 */
export function storedKeyPattern(storePrefix = '', hash?: string): string {
  return `${literalPattern(storePrefix)}*{${hash === undefined ? '*' : literalPattern(hash)}}:*`
}

/**
 * One SCAN step over one server's keys of a RedisStore (`Store.scanStored`).
 *
 * KEYS     none (the script reads only the keys SCAN returns, on the server it runs on)
 * ARGV[1]  the SCAN cursor
 * ARGV[2]  the MATCH pattern (`storedKeyPattern`)
 * ARGV[3]  the COUNT hint
 * ARGV[4]  the override record's suffix, `:` first
 * ARGV[5]  on a Cluster, the master's node id (the script runs wrapped by `onMaster`, master-scan.ts)
 *
 * Returns { next cursor, then per key found: the key, and the client key its override record holds (a record's
 * `key`), else '' }.
 */
export const SCAN_STORED_SCRIPT =
  scriptOf(`local step = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local out = { step[1] }
local suffix = ARGV[4]
for _, key in ipairs(step[2]) do
  local raw = ''
  if string.sub(key, -#suffix) == suffix then
    local json = redis.pcall('GET', key)
    if type(json) == 'string' then
      local ok, rec = pcall(cjson.decode, json)
      if ok and type(rec) == 'table' and type(rec.key) == 'string' then raw = rec.key end
    end
  end
  out[#out + 1] = key
  out[#out + 1] = raw
end
return out
`)

/** One step of a scan of the keys under `storePrefix`, decoded (`RedisStore.scanStored`). */
export async function scanStored(
  runner: RedisScriptRunner,
  scripts: LoadedScripts,
  storePrefix: string,
  page: { cursor?: string | undefined; count: number },
): Promise<StoredKeyPage> {
  const pattern = storedKeyPattern(storePrefix)
  const step = await scanStep(runner, scripts, SCAN_STORED_SCRIPT, page.cursor, (scan) => [
    scan,
    pattern,
    String(page.count),
    `:${RECORD_SUFFIX}`,
  ])
  const found: StoredKeyPage = { keys: [], foreign: 0, cursor: step.cursor }
  for (let i = 1; i + 1 < step.reply.length; i += 2) {
    const stored = decodeStoredKey(String(step.reply[i]), storePrefix)
    if (stored === undefined) {
      found.foreign++
      continue
    }
    const raw = String(step.reply[i + 1])
    if (raw !== '') stored.raw = raw
    found.keys.push(stored)
  }
  return found
}
