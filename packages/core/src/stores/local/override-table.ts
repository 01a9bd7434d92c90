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
import { storedRecord } from './stored-scan.js'

export class OverrideTable {
  /** Scope → client key → record. Operators set them: no eviction (an ended record goes when read or swept). */
  readonly #scopes = new Map<string, Map<string, OverrideRecord>>()

  /**
   * The record of `key` under `scope` at `now`, ended parts left out. NOTE: a read drops nothing, so that the
   * positions `list` pages by only move when a record is changed or swept.
   */
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
   * A page of live records; the cursor is the number of keys already passed in the scope's insertion order, so a
   * record removed meanwhile (changed to nothing, or swept once ended) may let the next page skip one.
   */
  list(scope: string, cursor: string | undefined, count: number, now: number): OverridePage {
    const table = this.#scopes.get(scope)
    const start = cursor === undefined ? 0 : Number(cursor)
    const records: OverrideRecord[] = []
    if (table === undefined) return { records, cursor: undefined }
    const keys = [...table.keys()]
    let index = start
    for (; index < keys.length && records.length < count; index++) {
      const record = liveOverrideRecord(table.get(keys[index]!), now)
      if (record !== undefined) records.push(record)
    }
    return { records, cursor: index < keys.length ? String(index) : undefined }
  }

  /** Every live record at `now`, as a key of the store (`Store.scanStored`). */
  *stored(now: number): Generator<StoredKey> {
    for (const [scope, table] of this.#scopes)
      for (const [key, record] of table)
        if (liveOverrideRecord(record, now) !== undefined) yield storedRecord(scope, key)
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
