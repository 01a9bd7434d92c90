/**
 * The rows of `topStored` kept while its scan goes: the `count` nearest their limit so far, and the raw client keys
 * the scan's override records hold. Its memory is bounded by `count` (and a fixed number of raw keys), never by the
 * keys scanned (a scan of a million keys kept every one of them until it ended).
 */
import type { Inspection } from './inspection.js'

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
  /** With plans: the key's plan as the store recorded it (`limit` is that plan's, under any override). */
  plan?: string
  /** Whether the key has a manual block (ranked first). */
  blocked: boolean
  inspection: Inspection
}

/** Raw keys kept from override records found before the counters of their key: at most this many. */
export const RAW_KEYS_KEPT = 10_000

export class TopRanking {
  readonly #count: number
  /** The rows kept, best first: at most `count`. */
  #rows: TopKey[] = []
  /** The kept rows by the hash of their key (a client key may count in several limiters). */
  #byHash = new Map<string, TopKey[]>()
  /** Raw keys of records found so far, by hash: at most `RAW_KEYS_KEPT`. */
  readonly #raw = new Map<string, string>()

  constructor(count: number) {
    this.#count = count
  }

  /** The rows kept, nearest their limit first. */
  get rows(): TopKey[] {
    return this.#rows
  }

  /**
   * A raw client key found in an override record: given to the rows of its hash kept now, and kept for rows read
   * later while fewer than `RAW_KEYS_KEPT` are (past that, a row whose record came before its counters shows hashed).
   */
  rawKey(hash: string, raw: string): void {
    for (const row of this.#byHash.get(hash) ?? []) named(row, raw)
    if (this.#raw.size < RAW_KEYS_KEPT || this.#raw.has(hash)) this.#raw.set(hash, raw)
  }

  /**
   * Rows just read: each kept if it ranks among the `count` nearest. A row of a key already kept (a key of several
   * rules is found once per rule on Redis) replaces it.
   */
  add(rows: readonly TopKey[]): void {
    const kept = new Map(this.#rows.map((row) => [idOf(row), row]))
    const worst = this.#rows.length < this.#count ? undefined : this.#rows[this.#rows.length - 1]
    let changed = false
    for (const row of rows) {
      const id = idOf(row)
      if (!kept.has(id) && worst !== undefined && compare(row, worst) >= 0) continue
      if (row.hashed) {
        const raw = this.#raw.get(row.hash)
        if (raw !== undefined) named(row, raw)
      }
      kept.set(id, row)
      changed = true
    }
    if (!changed) return
    this.#rows = [...kept.values()].sort(compare).slice(0, this.#count)
    this.#byHash = new Map()
    for (const row of this.#rows) {
      const same = this.#byHash.get(row.hash)
      if (same === undefined) this.#byHash.set(row.hash, [row])
      else same.push(row)
    }
  }
}

/** The row of `inspection`: its rule nearest the limit (the largest share used). */
export function rowOf(limiter: string, namespace: string, hash: string, inspection: Inspection): TopKey {
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
    ...(inspection.plan !== undefined && { plan: inspection.plan }),
    inspection,
  }
}

/** The row named by its raw client key. */
export function named(row: TopKey, raw: string): void {
  row.key = raw
  row.hashed = false
  row.inspection.key = raw
}

function idOf(row: TopKey): string {
  return `${row.namespace}{${row.hash}}`
}

function share(rule: { used: number; limit: number }): number {
  return rule.used / rule.limit
}

const blocked = (row: TopKey) => (row.blocked ? 1 : 0)

/** The ranking: blocked first, then by share used, then by hash (a stable order). */
function compare(a: TopKey, b: TopKey): number {
  return blocked(b) - blocked(a) || share(b) - share(a) || a.hash.localeCompare(b.hash)
}
