/**
 * MemoryStore's keys read back for an operator's tools (`Store.scanStored`): one per client key and namespace
 * (its rules together), and one per override record, paged by position.
 */
import { invalid } from '../../support/errors.js'
import type { StoredKey, StoredKeyPage } from '../types.js'
import { storedClientId } from './client-id.js'
import { type KeyStateData, liveAt } from './key-state.js'

/**
 * Every live key of a MemoryStore: each client's counters per namespace (from its tables, by rule ids and
 * namespace), then `records`.
 */
export function* storedKeys(
  bySignature: ReadonlyMap<string, ReadonlyMap<string, ReadonlyMap<string, KeyStateData>>>,
  records: Iterable<StoredKey>,
  now: number,
): Generator<StoredKey> {
  for (const [signature, byNamespace] of bySignature)
    for (const [namespace, table] of byNamespace)
      for (const [id, entry] of table)
        if (liveAt(entry, now) !== undefined) yield storedCounters(namespace, id, signature)
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

/**
 * The page of `keys` after the first `cursor` of them (a position), at most `count`. A key removed meanwhile may let the
 * next page skip one: a scan is a view for an operator, not a snapshot.
 */
export function storedPage(
  keys: Iterable<StoredKey>,
  { cursor, count }: { cursor?: string | undefined; count: number },
): StoredKeyPage {
  const start = cursor === undefined ? 0 : Number(cursor)
  if (!Number.isSafeInteger(start) || start < 0)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'cursor', cursor, 'a cursor a previous page returned')
  const page: StoredKeyPage = { keys: [], foreign: 0, cursor: undefined }
  let at = 0
  for (const key of keys) {
    if (at++ < start) continue
    if (page.keys.length === count) {
      page.cursor = String(start + count)
      break
    }
    page.keys.push(key)
  }
  return page
}
