/**
 * The keys a SyncedStore process holds: one table per rule set (by storage ids), limiter prefix and override scope
 * (none for a limiter without overrides), keyed by the client key itself as in MemoryStore (no per-request key
 * concatenation), their count, and their recency, so that the least recently used can be evicted past `maxKeys`.
 */
import type { Rule } from '../../algorithms/types.js'
import { emitWarning } from '../../support/runtime.js'
import { RecencyList } from '../local/recency.js'
import type { StoreTarget } from '../types.js'
import { canSync, type SyncEntry } from './entry.js'

type Table = Map<string, SyncEntry>

/** The tables of one rule set: by limiter prefix, for limiters without overrides; by scope then prefix, with them. */
interface RuleSetTables {
  readonly plain: Map<string, Table>
  readonly scoped: Map<string, Map<string, Table>>
}

/** @internal SyncedStore's tables of held keys (see the file's comment). */
export class SyncedTables {
  /** Per rule set: its tables. `null`: rules that cannot be synchronised. */
  readonly #tables = new WeakMap<readonly Rule[], RuleSetTables | null>()
  readonly #bySignature = new Map<string, RuleSetTables>()
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

  /**
   * The table of the target's rule set, limiter prefix and override scope; undefined when its rules cannot be
   * synchronised. NOTE: two limiters of one namespace and different scopes (a superseded limiter) hold an entry each,
   * as two processes would: each reads its own record.
   */
  tableOf(target: StoreTarget): Table | undefined {
    let tables = this.#tables.get(target.rules)
    if (tables === undefined) {
      tables = this.#tablesFor(target.rules)
      this.#tables.set(target.rules, tables)
    }
    if (tables === null) return undefined
    let byPrefix = tables.plain
    if (target.overrides !== undefined) {
      let scoped = tables.scoped.get(target.overrides)
      if (scoped === undefined) {
        scoped = new Map()
        tables.scoped.set(target.overrides, scoped)
      }
      byPrefix = scoped
    }
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

  /**
   * The held entries of the target's key, rule set and limiter prefix, under every override scope and none (for
   * a reset); undefined when its rules cannot be synchronised.
   */
  heldOf(target: StoreTarget): SyncEntry[] | undefined {
    if (this.tableOf(target) === undefined) return undefined
    const tables = this.#tables.get(target.rules)!
    const held: SyncEntry[] = []
    for (const byPrefix of [tables.plain, ...tables.scoped.values()]) {
      const entry = byPrefix.get(target.prefix)?.get(target.key)
      if (entry !== undefined) held.push(entry)
    }
    return held
  }

  /** The held entries of `key` under the override `scope`, in every rule set and limiter prefix. */
  *entriesOf(scope: string, key: string): IterableIterator<SyncEntry> {
    for (const tables of this.#bySignature.values()) {
      for (const table of tables.scoped.get(scope)?.values() ?? []) {
        const entry = table.get(key)
        if (entry !== undefined) yield entry
      }
    }
  }

  /** Rule arrays with the same ids share state, so they share tables; null when a rule cannot be synchronised. */
  #tablesFor(rules: readonly Rule[]): RuleSetTables | null {
    if (canSync(rules)) {
      const signature = rules.map((rule) => rule.id).join(',')
      let tables = this.#bySignature.get(signature)
      if (tables === undefined) {
        tables = { plain: new Map(), scoped: new Map() }
        this.#bySignature.set(signature, tables)
      }
      return tables
    }
    emitWarning(
      `SyncedStore synchronises sliding window counter and fixed window rules only; rules ${rules.map((rule) => rule.id).join(', ')} are decided by an exact RedisStore, one round trip per request.`,
      'RATEWINDOW_SYNC_UNSUPPORTED',
    )
    return null
  }
}
