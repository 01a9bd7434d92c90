/**
 * MemoryStore's keys read back for an operator's tools (`Store.scanStored`): one per client key and namespace
 * (its rules together), and one per override record; and the pages of such a walk (`OpenScans`), which resume where
 * the last page stopped.
 */
import { invalid } from '../../support/errors.js'
import type { StoredKey } from '../types.js'
import { storedClientId } from './client-id.js'
import { type KeyStateData, liveAt } from './key-state.js'

/** The store's time, read once per page and seen by the walk that page resumes. */
export interface PageTime {
  now: number
}

/**
 * Every live key of a MemoryStore: each client's counters per namespace (from its tables, by rule ids and
 * namespace), then `records`.
 */
export function* storedKeys(
  bySignature: ReadonlyMap<string, ReadonlyMap<string, ReadonlyMap<string, KeyStateData>>>,
  records: Iterable<StoredKey>,
  time: PageTime,
): Generator<StoredKey> {
  for (const [signature, byNamespace] of bySignature)
    for (const [namespace, table] of byNamespace)
      for (const [id, entry] of table)
        if (liveAt(entry, time.now) !== undefined) yield storedCounters(namespace, id, signature)
  yield* records
}

/** A client's counters under `namespace` (rule ids `signature`), held as `id` (`storedClientId`). */
export function storedCounters(namespace: string, id: string, signature: string): StoredKey {
  const stored: StoredKey = {
    key: `${namespace}{${id}}`,
    namespace,
    hash: id,
    part: { kind: 'rule', ruleId: signature },
  }
  // An id kept as it is is the client key; a long one is kept as its hash.
  if (id === storedClientId(id)) stored.raw = id
  return stored
}

/** The override record of `key` under `scope`. */
export function storedRecord(scope: string, key: string): StoredKey {
  const hash = storedClientId(key)
  return { key: `${scope}{${hash}}`, namespace: scope, hash, part: { kind: 'override' }, raw: key }
}

/** A walk left open between two pages: what it walks, where it stands, and the item it read ahead. */
interface OpenScan<T> {
  what: string
  walk: Iterator<T>
  time: PageTime
  /** Items given in pages so far. */
  given: number
  /** The next item, read to know whether the walk is done. */
  ahead: IteratorResult<T>
}

/** Walks left open at once per store: one more closes the least recently paged. */
const OPEN_SCANS = 32

/**
 * Pages of walks over a store's maps, each page resuming the walk where the page before stopped: a full walk visits
 * each item once, whatever the number of pages (a page re-walked every item before its position, so a
 * listing of n items in pages of c took n² / 2c steps, 124 s for 1 M records). The cursor names the walk and the
 * items given so far (`<walk>.<given>`). Map iterators see items added after them and skip those removed, so a
 * walk shows each item present from its first page to its last exactly once; one added meanwhile may show, one
 * removed meanwhile does not, and one removed and added again may show twice. A cursor whose walk is no longer open
 * (more than `OPEN_SCANS` walks paged since, or a page asked again) walks again from the start to its place, once.
 */
export class OpenScans<T> {
  readonly #open = new Map<number, OpenScan<T>>()
  #walks = 0

  /**
   * The page after `cursor` (at most `count` items) of the walk `start` begins over `what` (a scope, or '' for the
   * whole store), at the store's time `now`.
   */
  page(
    what: string,
    { cursor, count }: { cursor?: string | undefined; count: number },
    now: number,
    start: (time: PageTime) => Iterator<T>,
  ): { items: T[]; cursor: string | undefined } {
    const scan = this.#resume(what, cursor, now, start)
    const items: T[] = []
    while (!scan.ahead.done && items.length < count) {
      items.push(scan.ahead.value)
      scan.ahead = scan.walk.next()
    }
    scan.given += items.length
    const id = cursor === undefined ? this.#walks++ : walkOf(cursor).id
    this.#open.delete(id)
    if (scan.ahead.done) return { items, cursor: undefined }
    this.#open.set(id, scan)
    if (this.#open.size > OPEN_SCANS) this.#open.delete(this.#open.keys().next().value!)
    return { items, cursor: `${id}.${scan.given}` }
  }

  /** The walk the cursor names where it stopped, or a new one brought there. */
  #resume(
    what: string,
    cursor: string | undefined,
    now: number,
    start: (time: PageTime) => Iterator<T>,
  ): OpenScan<T> {
    const at = cursor === undefined ? undefined : walkOf(cursor)
    const open = at === undefined ? undefined : this.#open.get(at.id)
    if (open !== undefined && open.what === what && open.given === at!.given) {
      open.time.now = now
      return open
    }
    const time = { now }
    const walk = start(time)
    let ahead = walk.next()
    for (let skipped = 0; skipped < (at?.given ?? 0) && !ahead.done; skipped++) ahead = walk.next()
    return { what, walk, time, given: at?.given ?? 0, ahead }
  }
}

function walkOf(cursor: string): { id: number; given: number } {
  const match = /^(\d{1,15})\.(\d{1,15})$/.exec(cursor)
  if (match === null)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'cursor', cursor, 'a cursor a previous page returned')
  return { id: Number(match[1]), given: Number(match[2]) }
}
