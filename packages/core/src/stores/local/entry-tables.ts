/**
 * MemoryStore's clients: one table per namespace (rule set and limiter prefix), keyed by the client id itself (no
 * per-request key concatenation, no long composite strings held per key); the recency list through every entry,
 * which evicts the least recently used past `maxKeys`; and the sweep of expired entries.
 */
import type { Rule } from '../../algorithms/types.js'
import { isEpochTime } from '../../time/default-clock.js'
import { realSetImmediate } from '../../time/real-timers.js'
import type { StoreRequest, StoreTarget } from '../types.js'
import { freshStates, type KeyStateData, keepKey, liveAt } from './key-state.js'
import { type Linked, RecencyList } from './recency.js'

/** A client's state (the per-key steps of key-state.ts run on it), where it is held, and its place in recency. */
export interface Entry extends KeyStateData, Linked<Entry> {
  /** The table holding the entry (one per limiter namespace), and its key there. */
  table: Map<string, Entry>
  id: string
}

/** Entries the background sweep looks at before it yields to the event loop. */
const SWEEP_SLICE = 5_000

export class EntryTables {
  readonly #tables = new WeakMap<readonly Rule[], Map<string, Map<string, Entry>>>()
  readonly #allTables = new Set<Map<string, Entry>>()
  /** Every table by its rules' ids, then by namespace: what `scanStored` reads. */
  readonly bySignature = new Map<string, Map<string, Map<string, Entry>>>()
  #size = 0
  /**
   * NOTE: recency is a doubly linked list through the entries, not Map re-insertion: deleting from the front
   * of a Map leaves holes that every `keys().next()` walks over, which made eviction quadratic under floods.
   */
  readonly #recency = new RecencyList<Entry>()
  readonly #maxKeys: number
  #sweeping = false

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys
  }

  /** Number of client keys held now (expired ones count until swept or touched). */
  get size(): number {
    return this.#size
  }

  /** The target `table` answered last, and its table: a limiter asks for its own one call after another. */
  #lastRules: readonly Rule[] | undefined
  #lastPrefix = ''
  #lastTable: Map<string, Entry> | undefined

  /** The table of the target's namespace: its rule set (by storage ids) and limiter prefix. */
  table(target: StoreTarget): Map<string, Entry> {
    if (target.rules === this.#lastRules && target.prefix === this.#lastPrefix) return this.#lastTable!
    const table = this.#tableOf(target)
    this.#lastRules = target.rules
    this.#lastPrefix = target.prefix
    this.#lastTable = table
    return table
  }

  #tableOf(target: StoreTarget): Map<string, Entry> {
    let byPrefix = this.#tables.get(target.rules)
    if (byPrefix === undefined) {
      // Rule arrays with the same ids share state, so they must share tables.
      const signature = target.rules.map((rule) => rule.id).join(',')
      byPrefix = this.bySignature.get(signature) ?? new Map()
      this.bySignature.set(signature, byPrefix)
      this.#tables.set(target.rules, byPrefix)
    }
    let table = byPrefix.get(target.prefix)
    if (table === undefined) {
      table = new Map()
      byPrefix.set(target.prefix, table)
      this.#allTables.add(table)
    }
    return table
  }

  /** The entry for `id`, with fresh states if it was missing or expired; a new one may evict the oldest. */
  take(table: Map<string, Entry>, id: string, rules: readonly Rule[], now: number): Entry {
    let entry = table.get(id)
    if (entry === undefined) {
      const oldest = this.#recency.leastRecent
      if (this.#size >= this.#maxKeys && oldest !== undefined) this.remove(oldest)
      entry = {
        table,
        id,
        states: freshStates(rules),
        penalty: undefined,
        expiresAt: 0,
        older: undefined,
        newer: undefined,
      }
      table.set(id, entry)
      this.#size++
      this.#recency.touch(entry)
    } else if (liveAt(entry, now) === undefined) {
      entry.states = freshStates(rules)
      entry.penalty = undefined
      entry.tuned = undefined
    }
    return entry
  }

  /** Records the entry's expiry and marks it most recently used; drops it if it holds nothing. */
  keep(entry: Entry, rules: readonly Rule[], penalty: StoreRequest['penalty'], now: number): void {
    if (keepKey(rules, penalty, entry, now)) this.#recency.touch(entry)
    else this.remove(entry)
  }

  remove(entry: Entry): void {
    if (entry.table.get(entry.id) !== entry) return
    entry.table.delete(entry.id)
    this.#size--
    this.#recency.remove(entry)
  }

  /** Drops every entry expired at `now`, in one pass. */
  sweep(now: number): void {
    for (const table of this.#allTables)
      for (const entry of table.values()) if (entry.expiresAt <= now) this.remove(entry)
  }

  /** Forgets every entry. */
  clear(): void {
    for (const table of this.#allTables) table.clear()
    this.#size = 0
    this.#recency.clear()
  }

  /** Sweeps in slices of SWEEP_SLICE keys, yielding to the event loop between slices. */
  sweepInSlices(clock: () => number): void {
    if (this.#sweeping) return
    this.#sweeping = true
    const tables = [...this.#allTables].values()
    let entries: Iterator<Entry> | undefined
    const slice = () => {
      const now = clock()
      // A clock gone wrong is reported by the next decision; the background sweep just stops.
      if (!isEpochTime(now)) {
        this.#sweeping = false
        return
      }
      for (let i = 0; i < SWEEP_SLICE; i++) {
        const next = entries?.next()
        if (next === undefined || next.done) {
          const table = tables.next()
          if (table.done) {
            this.#sweeping = false
            return
          }
          entries = table.value.values()
          continue
        }
        if (next.value.expiresAt <= now) this.remove(next.value)
      }
      realSetImmediate(slice)
    }
    slice()
  }
}
