/**
 * The override records of an in-process store (`MemoryStore`): one record per limiter scope and client key,
 * changed and read on the store's clock, ended parts dropped as they are read.
 */
import {
  applyOverrideChange,
  liveOverrideRecord,
  type OverrideChange,
  type OverrideRecord,
} from '../../algorithms/override.js'
import type { OverridePage, StoredKey } from '../types.js'
import { OpenScans, type PageTime, storedRecord } from './stored-scan.js'

export class OverrideTable {
  /** Scope → client key → record. Operators set them: no eviction (an ended record goes when read or swept). */
  readonly #scopes = new Map<string, Map<string, OverrideRecord>>()
  /** The pages of `list` left open. */
  readonly #pages = new OpenScans<OverrideRecord>()

  /** The record of `key` under `scope` at `now`, ended parts left out. A read drops nothing (the sweep does). */
  read(scope: string, key: string, now: number): OverrideRecord | undefined {
    return liveOverrideRecord(this.#scopes.get(scope)?.get(key), now)
  }

  update(scope: string, key: string, change: OverrideChange, now: number): OverrideRecord | undefined {
    let table = this.#scopes.get(scope)
    if (table === undefined) {
      table = new Map()
      this.#scopes.set(scope, table)
    }
    const record = applyOverrideChange(table.get(key), key, change, now)
    this.#keep(scope, table, key, record)
    return record
  }

  /**
   * A page of live records: the walk of the scope's records in the order they were first set, resumed where the
   * last page stopped (`OpenScans`), so a listing visits each record once.
   */
  list(scope: string, page: { cursor?: string | undefined; count: number }, now: number): OverridePage {
    const { items, cursor } = this.#pages.page(scope, page, now, (time) => this.#live(scope, time))
    return { records: items, cursor }
  }

  /** Every live record at `now`, as a key of the store (`Store.scanStored`), `now` read as the walk goes. */
  *stored(time: PageTime): Generator<StoredKey> {
    for (const [scope, table] of this.#scopes)
      for (const [key, record] of table)
        if (liveOverrideRecord(record, time.now) !== undefined) yield storedRecord(scope, key)
  }

  *#live(scope: string, time: PageTime): Generator<OverrideRecord> {
    const table = this.#scopes.get(scope)
    if (table === undefined) return
    for (const record of table.values()) {
      const live = liveOverrideRecord(record, time.now)
      if (live !== undefined) yield live
    }
  }

  /** Drops every ended record. */
  sweep(now: number): void {
    for (const [scope, table] of this.#scopes)
      for (const [key, record] of table) this.#keep(scope, table, key, liveOverrideRecord(record, now))
  }

  clear(): void {
    this.#scopes.clear()
  }

  #keep(
    scope: string,
    table: Map<string, OverrideRecord>,
    key: string,
    record: OverrideRecord | undefined,
  ): void {
    if (record !== undefined) table.set(key, record)
    else {
      table.delete(key)
      if (table.size === 0) this.#scopes.delete(scope)
    }
  }
}
