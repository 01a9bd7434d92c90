/**
 * The keys nearest their limit, found by scanning a store (`Store.scanStored`: RedisStore with any client, on one
 * server or a Cluster; MemoryStore) and read with the limiter's own peek (`inspectStored`): what
 * `limiter.operator.top`, `@ratewindow/admin`'s `GET /limiters/:limiter/top` and `@ratewindow/cli`'s `top` show.
 * A scan is bounded by a number of keys read; it reads, never counts, and adds nothing to the decision path.
 */
import type { RecordedPlans } from '../algorithms/plans.js'
import type { Rule } from '../algorithms/types.js'
import type { Awaitable, StoredKey, StoredKeyPage } from '../stores/types.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { wholeNumber } from '../support/validators.js'
import { realSetImmediate } from '../time/real-timers.js'
import { inspectStored, type StoredStateReader, type StoredTarget } from './stored-state.js'
import { named, rowOf, type TopKey, TopRanking } from './top-ranking.js'

export type { TopKey }

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
  /** Its plans (`limiter.operator.plans`): the keys are read with the plan the store recorded for each. */
  plans?: RecordedPlans
}

/** `topStored`'s options. */
export interface TopStoredOptions extends TopOptions, ScanOptions {
  /** The limiter of a counter namespace found (asked once per namespace); undefined leaves its keys out. */
  limiterOf(namespace: string): StoredLimiter | undefined
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
/** Namespaces whose limiter (`limiterOf`) is remembered during one scan. */
const NAMESPACES_KEPT = 1000
const TOP_OPTIONS = namesOf<TopOptions>({ count: true, scan: true })

/** Reads the store's keys a step at a time, at most `options.scan`, each given to `visit`. */
export function scanStoredKeys(
  store: StoredKeyScanner,
  options: ScanOptions,
  visit: (key: StoredKey) => void,
): Promise<ScanTotals> {
  return scanSteps(store, options, (keys) => {
    for (const key of keys) visit(key)
  })
}

/**
 * Reads the store's keys a step at a time, at most `options.scan`, each step's given to `take` (and awaited) before
 * the next is asked. NOTE: the event loop runs between two steps (a `setImmediate`), also where the store answers
 * at once (MemoryStore): a scan of a million keys never holds the process for longer than one step.
 */
async function scanSteps(
  store: StoredKeyScanner,
  options: ScanOptions,
  take: (keys: readonly StoredKey[]) => Awaitable<void>,
): Promise<ScanTotals> {
  const { scan = SCAN_DEFAULT, progress } = options
  wholeNumber(scan, 'scan', { min: 1 })
  let scanned = 0
  let cursor: string | undefined
  for (;;) {
    const page = await store.scanStored(cursor === undefined ? { count: STEP } : { cursor, count: STEP })
    const room = scan - scanned
    if (page.keys.length > room) {
      await take(page.keys.slice(0, room))
      return { scanned: scan, complete: false }
    }
    await take(page.keys)
    scanned += page.keys.length + page.foreign
    cursor = page.cursor
    progress?.(Math.min(scanned, scan))
    if (cursor === undefined) return { scanned, complete: true }
    await new Promise<void>((resolve) => realSetImmediate(resolve))
  }
}

/**
 * The keys nearest their limit among those a scan of `store` finds (at most `options.scan` read), the
 * `options.count` nearest first: manually blocked keys, then by the share of the limit used of their rule nearest
 * it. Each key is read by a peek, with the rules `options.limiterOf` gives its namespace, in the step of the scan
 * that found it: what is held at once is one step's keys and the `count` rows kept (`TopRanking`), whatever `scan`
 * reads. A key kept with several rules (RedisStore: one Redis key per rule) may be read once per rule.
 */
export async function topStored(
  store: StoredKeyScanner & StoredStateReader,
  options: TopStoredOptions,
): Promise<TopKeys> {
  const { count = COUNT_DEFAULT } = options
  wholeNumber(count, 'count', { min: 1 })
  const limiterOf = namespaceLimiters(options.limiterOf)
  const ranking = new TopRanking(count)
  const totals = await scanSteps(store, options, (keys) => readStep(store, keys, limiterOf, ranking))
  return { keys: ranking.rows, ...totals }
}

/** A counter found by the scan, with the limiter it is read with (and its raw key, where the store holds it). */
type Target = StoredTarget & { limiter: StoredLimiter; raw: string | undefined }

/** One step's keys: the raw keys its override records hold told to `ranking`, its counters read and ranked. */
async function readStep(
  store: StoredStateReader,
  keys: readonly StoredKey[],
  limiterOf: (namespace: string) => StoredLimiter | undefined,
  ranking: TopRanking,
): Promise<void> {
  const targets = new Map<string, Target>()
  for (const key of keys) {
    if (key.part.kind === 'override' && key.raw !== undefined) ranking.rawKey(key.hash, key.raw)
    if (key.part.kind !== 'rule') continue
    const limiter = limiterOf(key.namespace)
    if (limiter === undefined) continue
    const { namespace, hash, raw } = key
    const target: Target = { namespace, hash, rules: limiter.rules, limiter, raw }
    if (limiter.overrides !== undefined) target.overrides = limiter.overrides
    if (limiter.plans !== undefined) target.plans = limiter.plans
    targets.set(`${namespace}{${hash}}`, target)
  }
  const all = [...targets.values()]
  for (let at = 0; at < all.length; at += READ_AT_ONCE)
    ranking.add(await Promise.all(all.slice(at, at + READ_AT_ONCE).map((target) => readRow(store, target))))
}

/** A counter read with its limiter's own peek (`inspectStored`), as a row. */
async function readRow(store: StoredStateReader, target: Target): Promise<TopKey> {
  const row = rowOf(target.limiter.name, target.namespace, target.hash, await inspectStored(store, target))
  if (target.raw !== undefined) named(row, target.raw)
  return row
}

/** `limiterOf` remembered per namespace, for the first `NAMESPACES_KEPT` namespaces of a scan. */
function namespaceLimiters(
  limiterOf: (namespace: string) => StoredLimiter | undefined,
): (namespace: string) => StoredLimiter | undefined {
  const known = new Map<string, StoredLimiter | undefined>()
  return (namespace) => {
    if (known.has(namespace)) return known.get(namespace)
    const limiter = limiterOf(namespace)
    if (known.size < NAMESPACES_KEPT) known.set(namespace, limiter)
    return limiter
  }
}

/** `limiter.operator.top`'s options checked (`count`, `scan`), as the method names them. */
export function topOptions(options: TopOptions, method: string): TopOptions {
  rejectUnknownOptions(options, TOP_OPTIONS, method)
  if (options.count !== undefined) wholeNumber(options.count, 'count', { min: 1 })
  if (options.scan !== undefined) wholeNumber(options.scan, 'scan', { min: 1 })
  return options
}
