/**
 * The keys nearest their limit, found by scanning a store (`Store.scanStored`: RedisStore with any client, on one
 * server or a Cluster; MemoryStore) and read with the limiter's own peek (`inspectStored`): what
 * `limiter.operator.top`, `@ratewindow/admin`'s `GET /limiters/:limiter/top` and `@ratewindow/cli`'s `top` show.
 * A scan is bounded by a number of keys read; it reads, never counts, and adds nothing to the decision path.
 */
import type { Rule } from '../algorithms/types.js'
import type { Awaitable, StoredKey, StoredKeyPage } from '../stores/types.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { wholeNumber } from '../support/validators.js'
import { realSetImmediate } from '../time/real-timers.js'
import type { Inspection } from './inspection.js'
import { inspectStored, type StoredStateReader } from './stored-state.js'

/** A store that can list the keys it keeps, a step at a time (`MemoryStore`, `RedisStore`). */
export interface StoredKeyScanner {
  scanStored(page: { cursor?: string | undefined; count: number }): Awaitable<StoredKeyPage>
}

/** How far a scan reads. */
export interface ScanOptions {
  /**
   * The most keys read (every key the store keeps counts: each rule's counter, penalty and override record).
   * @default 10000
   */
  scan?: number
  /** Told the keys read so far after each step (a progress line). */
  progress?: (scanned: number) => void
}

/** What a scan read. */
export interface ScanTotals {
  /** Keys read. */
  scanned: number
  /** Whether the scan read every key (false: `scan` stopped it). */
  complete: boolean
}

/** `limiter.operator.top`'s options. */
export interface TopOptions {
  /**
   * The keys returned, nearest their limit first.
   * @default 10
   */
  count?: number
  /**
   * The most keys the scan reads, as `ScanOptions.scan`.
   * @default 10000
   */
  scan?: number
}

/** The limiter counting under a namespace, as `topStored` reads its keys. */
export interface StoredLimiter {
  /** What the rows call it. */
  name: string
  /** Its rules (its own, or decoded from the namespace: `decodeNamespace`). */
  rules: readonly Rule[]
  /** Its override scope (`overrides: true`): the keys are read with their override and block. */
  overrides?: string
}

/** `topStored`'s options. */
export interface TopStoredOptions extends TopOptions, ScanOptions {
  /** The limiter of a counter namespace found (asked once per namespace); undefined leaves its keys out. */
  limiterOf(namespace: string): StoredLimiter | undefined
}

/** One key nearest its limit: its rule nearest the limit, and the whole inspection. */
export interface TopKey {
  /** The limiter's name (`StoredLimiter.name`). */
  limiter: string
  namespace: string
  /** The key as the store holds it (`StoredKey.hash`). */
  hash: string
  /** The raw client key where the store holds it (an override record keeps it), else `hash`. */
  key: string
  /** True when `key` is the hash. */
  hashed: boolean
  /** The rule nearest its limit: its policy name. */
  rule: string
  used: number
  limit: number
  remaining: number
  /** Ms until the rule's whole quota is back. */
  reset: number
  /** Whether the key has a manual block (ranked first). */
  blocked: boolean
  inspection: Inspection
}

/** The keys nearest their limit, and what the scan read. */
export interface TopKeys extends ScanTotals {
  keys: TopKey[]
}

const SCAN_DEFAULT = 10_000
const COUNT_DEFAULT = 10
/** Keys asked of the store per step (a SCAN COUNT hint). */
const STEP = 1000
/** Keys peeked at once (RedisStore groups them per node). */
const READ_AT_ONCE = 200
const TOP_OPTIONS = namesOf<TopOptions>({ count: true, scan: true })

/**
 * Reads the store's keys a step at a time, at most `options.scan`, each given to `visit`. NOTE: the event loop runs
 * between two steps (a `setImmediate`), also where the store answers at once (MemoryStore): a scan of a million keys
 * never holds the process for longer than one step.
 */
export async function scanStoredKeys(
  store: StoredKeyScanner,
  options: ScanOptions,
  visit: (key: StoredKey) => void,
): Promise<ScanTotals> {
  const { scan = SCAN_DEFAULT, progress } = options
  wholeNumber(scan, 'scan', { min: 1 })
  let scanned = 0
  let cursor: string | undefined
  do {
    const page = await store.scanStored(cursor === undefined ? { count: STEP } : { cursor, count: STEP })
    for (const key of page.keys) {
      if (scanned >= scan) return { scanned: scan, complete: false }
      scanned++
      visit(key)
    }
    scanned += page.foreign
    cursor = page.cursor
    progress?.(Math.min(scanned, scan))
    if (cursor !== undefined) await new Promise<void>((resolve) => realSetImmediate(resolve))
  } while (cursor !== undefined)
  return { scanned, complete: true }
}

/**
 * The keys nearest their limit among those a scan of `store` finds (at most `options.scan` read), the
 * `options.count` nearest first: manually blocked keys, then by the share of the limit used of their rule nearest
 * it. Each key is read by a peek, with the rules `options.limiterOf` gives its namespace.
 */
export async function topStored(
  store: StoredKeyScanner & StoredStateReader,
  options: TopStoredOptions,
): Promise<TopKeys> {
  const { count = COUNT_DEFAULT, limiterOf } = options
  wholeNumber(count, 'count', { min: 1 })
  const limiters = new Map<string, StoredLimiter | undefined>()
  const found = new Map<string, { namespace: string; limiter: StoredLimiter; hash: string }>()
  const raw = new Map<string, string>()
  const totals = await scanStoredKeys(store, options, (key) => {
    if (key.raw !== undefined) raw.set(key.hash, key.raw)
    if (key.part.kind !== 'rule') return
    if (!limiters.has(key.namespace)) limiters.set(key.namespace, limiterOf(key.namespace))
    const limiter = limiters.get(key.namespace)
    if (limiter !== undefined)
      found.set(`${key.namespace}{${key.hash}}`, { namespace: key.namespace, limiter, hash: key.hash })
  })
  // Only the `count` nearest are kept between batches: the memory is the scan's key names, not its readings.
  let keys: TopKey[] = []
  const targets = [...found.values()]
  found.clear()
  for (let at = 0; at < targets.length; at += READ_AT_ONCE) {
    const batch = targets.slice(at, at + READ_AT_ONCE).map(async ({ namespace, limiter, hash }) => {
      const inspection = await inspectStored(store, {
        namespace,
        hash,
        rules: limiter.rules,
        ...(limiter.overrides !== undefined && { overrides: limiter.overrides }),
      })
      return rowOf(limiter.name, namespace, hash, inspection)
    })
    keys = rank(keys.concat(await Promise.all(batch)), count)
  }
  for (const row of keys) {
    const key = raw.get(row.hash)
    if (key === undefined) continue
    row.key = key
    row.hashed = false
    row.inspection.key = key
  }
  return { keys, ...totals }
}

/** `limiter.operator.top`'s options checked (`count`, `scan`), as the method names them. */
export function topOptions(options: TopOptions, method: string): TopOptions {
  rejectUnknownOptions(options, TOP_OPTIONS, method)
  if (options.count !== undefined) wholeNumber(options.count, 'count', { min: 1 })
  if (options.scan !== undefined) wholeNumber(options.scan, 'scan', { min: 1 })
  return options
}

/** Its rule nearest the limit (the largest share used). */
function rowOf(limiter: string, namespace: string, hash: string, inspection: Inspection): TopKey {
  let nearest = inspection.rules[0]!
  for (const rule of inspection.rules) if (share(rule) > share(nearest)) nearest = rule
  return {
    limiter,
    namespace,
    hash,
    key: hash,
    hashed: true,
    rule: nearest.name,
    used: nearest.used,
    limit: nearest.limit,
    remaining: nearest.remaining,
    reset: nearest.reset,
    blocked: inspection.block !== undefined,
    inspection,
  }
}

function share(rule: { used: number; limit: number }): number {
  return rule.used / rule.limit
}

/** The `count` nearest their limit: blocked first, then by share used, then by hash (a stable order). */
function rank(rows: TopKey[], count: number): TopKey[] {
  const blocked = (row: TopKey) => (row.blocked ? 1 : 0)
  return rows
    .sort((a, b) => blocked(b) - blocked(a) || share(b) - share(a) || a.hash.localeCompare(b.hash))
    .slice(0, count)
}
