/**
 * The keys a SyncedStore process holds: one table per rule set (by storage ids) and limiter prefix, keyed by the
 * client key itself as in MemoryStore (no per-request key concatenation), their count, and their recency, so that
 * the least recently used can be evicted past `maxKeys`.
 */
import type { Rule } from '../../algorithms/types.js'
import { emitWarning } from '../../support/runtime.js'
import { RecencyList } from '../local/recency.js'
import type { StoreTarget } from '../types.js'
import { canSync, type SyncEntry } from './entry.js'

type Table = Map<string, SyncEntry>

/** @internal SyncedStore's tables of held keys (see the file's comment). */
export class SyncedTables {
  /** Per rule set: its tables by limiter prefix. `null`: rules that cannot be synchronised. */
  readonly #tables = new WeakMap<readonly Rule[], Map<string, Table> | null>()
  readonly #bySignature = new Map<string, Map<string, Table>>()
  readonly #recency = new RecencyList<SyncEntry>()
  readonly #maxKeys: number
  #size = 0

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys
  }

  /** Number of keys held. */
  get size(): number {
    return this.#size
  }

  /** The least recently used key, when one more would pass `maxKeys`: to evict before adding one. */
  get overflow(): SyncEntry | undefined {
    return this.#size >= this.#maxKeys ? this.#recency.leastRecent : undefined
  }

  /** The table of the target's rule set and limiter prefix; undefined when its rules cannot be synchronised. */
  tableOf(target: StoreTarget): Table | undefined {
    let byPrefix = this.#tables.get(target.rules)
    if (byPrefix === undefined) {
      byPrefix = this.#byPrefixFor(target.rules)
      this.#tables.set(target.rules, byPrefix)
    }
    if (byPrefix === null) return undefined
    let table = byPrefix.get(target.prefix)
    if (table === undefined) {
      table = new Map()
      byPrefix.set(target.prefix, table)
    }
    return table
  }

  /** Puts `entry` (new, or taken back from the departing) in its table. */
  hold(entry: SyncEntry): void {
    entry.held = true
    entry.table.set(entry.target.key, entry)
    this.#size++
  }

  /** Marks `entry` most recently used. */
  touch(entry: SyncEntry): void {
    this.#recency.touch(entry)
  }

  /** Takes `entry` out of its table (reset or evicted): no longer synced by the tick. */
  remove(entry: SyncEntry): void {
    if (!entry.held) return
    entry.held = false
    entry.table.delete(entry.target.key)
    this.#size--
    entry.dirty = false
    this.#recency.remove(entry)
  }

  /** Rule arrays with the same ids share state, so they share tables; null when a rule cannot be synchronised. */
  #byPrefixFor(rules: readonly Rule[]): Map<string, Table> | null {
    if (canSync(rules)) {
      const signature = rules.map((rule) => rule.id).join(',')
      let byPrefix = this.#bySignature.get(signature)
      if (byPrefix === undefined) {
        byPrefix = new Map()
        this.#bySignature.set(signature, byPrefix)
      }
      return byPrefix
    }
    emitWarning(
      `SyncedStore synchronises sliding window counter and fixed window rules only; rules ${rules.map((rule) => rule.id).join(', ')} are decided by an exact RedisStore, one round trip per request.`,
      'RATEWINDOW_SYNC_UNSUPPORTED',
    )
    return null
  }
}
