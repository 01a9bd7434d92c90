/**
 * SyncedStore's departing entries: evicted keys whose admissions Redis has not acknowledged yet, or on which
 * requests still wait. A request for such a key takes its entry back (with its view and pending counts) rather
 * than starting from an empty view that knows nothing of them: one entry per key at any time.
 */
import type { SyncEntry } from './entry.js'

type Table = Map<string, SyncEntry>

/** @internal The departing entries, per table and key (see the file's comment). */
export class Departures {
  readonly #byTable = new Map<Table, Table>()

  /**
   * An evicted entry departs while Redis has not acknowledged what it admitted, or while requests wait on it;
   * otherwise it is simply gone. Returns whether it departs.
   */
  add(entry: SyncEntry): boolean {
    if (entry.unacked === 0 && entry.waiting === 0) return false
    let departing = this.#byTable.get(entry.table)
    if (departing === undefined) {
      departing = new Map()
      this.#byTable.set(entry.table, departing)
    }
    departing.set(entry.target.key, entry)
    return true
  }

  /** The departing entry of `key` in `table`, taken back into use; undefined when none departs. */
  takeBack(table: Table, key: string): SyncEntry | undefined {
    if (this.#byTable.size === 0) return undefined
    const entry = this.#byTable.get(table)?.get(key)
    if (entry !== undefined) this.#departed(entry)
    return entry
  }

  /** An evicted entry stops departing once Redis acknowledged all it admitted and no request waits on it. */
  settle(entry: SyncEntry): void {
    if (entry.unacked === 0 && entry.waiting === 0) this.#departed(entry)
  }

  /** Every departing entry (for the counts still to send on exit and close). */
  *entries(): IterableIterator<SyncEntry> {
    for (const departing of this.#byTable.values()) yield* departing.values()
  }

  /** No longer departing: acknowledged by Redis, or taken back. */
  #departed(entry: SyncEntry): void {
    const departing = this.#byTable.get(entry.table)
    if (departing?.get(entry.target.key) !== entry) return
    departing.delete(entry.target.key)
    if (departing.size === 0) this.#byTable.delete(entry.table)
  }
}
