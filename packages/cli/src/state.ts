/**
 * What a scan finds, read with core's code: keys decoded (`decodeStoredKey`), namespaces decoded into limiters
 * (`decodeNamespace`, or the config's limiter of that namespace), each key's state read by the limiter's own peek
 * (`inspectStored`), and raw keys where an override record holds them.
 */
import {
  decodeNamespace,
  decodeStoredKey,
  type Inspection,
  inspectStored,
  type RateLimiter,
  type Rule,
  type StoredNamespace,
} from '@ratewindow/core'
import type { Connection } from './redis.js'
import { scanStoredKeys } from './redis.js'

/** A namespace found by the scan, with what decodes it. */
export interface FoundNamespace {
  decoded: StoredNamespace
  /** The config's limiter counting (or keeping records) under it. */
  limiter: RateLimiter | undefined
  /** The rules its keys are read with: the config limiter's, else the decoded ones; none when unknown. */
  rules: readonly Rule[] | undefined
  /** The hash tags found under it. */
  hashes: Set<string>
}

/** A scan's findings. */
export interface Scan {
  /** Keys read. */
  scanned: number
  /** Whether the scan read the whole keyspace (false: `--scan` stopped it). */
  complete: boolean
  namespaces: Map<string, FoundNamespace>
  /** Keys whose name is not one RedisStore writes under the prefix. */
  foreign: number
  /** The override records found: their Redis keys, by hash tag. */
  records: Map<string, string[]>
}

/** Scans the store's keys (at most `limit`) and decodes them. */
export async function scanStore(
  connection: Connection,
  prefix: string,
  limit: number,
  limiters: readonly RateLimiter[],
  progress?: (scanned: number) => void,
): Promise<Scan> {
  const { keys, complete } = await scanStoredKeys(connection.client, prefix, limit, progress)
  const scan: Scan = { scanned: keys.length, complete, namespaces: new Map(), foreign: 0, records: new Map() }
  for (const key of keys) {
    const stored = decodeStoredKey(key, prefix)
    if (stored === undefined) {
      scan.foreign++
      continue
    }
    if (stored.part.kind === 'override') {
      const records = scan.records.get(stored.hash) ?? []
      records.push(key)
      scan.records.set(stored.hash, records)
    }
    let found = scan.namespaces.get(stored.namespace)
    if (found === undefined) {
      const decoded = decodeNamespace(stored.namespace)
      if (decoded === undefined) {
        scan.foreign++
        continue
      }
      const limiter = limiters.find(
        (each) => each.namespace === stored.namespace || each.overrides.scope === stored.namespace,
      )
      found = { decoded, limiter, rules: limiter?.rules ?? decoded.rules, hashes: new Set() }
      scan.namespaces.set(stored.namespace, found)
    }
    if (stored.part.kind === 'rule') found.hashes.add(stored.hash)
  }
  return scan
}

/** One key of one limiter, read. */
export interface KeyState {
  /** The limiter's name (from the config), else its namespace. */
  limiter: string
  namespace: string
  hash: string
  inspection: Inspection
}

/** Reads every key of the counter namespaces of `scan` that can be read (rules known), `limiter` matching. */
export async function readStates(
  connection: Connection,
  scan: Scan,
  wanted: string | undefined,
  progress?: (read: number) => void,
): Promise<KeyState[]> {
  const targets: { found: FoundNamespace; hash: string }[] = []
  for (const found of scan.namespaces.values()) {
    if (found.decoded.kind !== 'counters' || found.rules === undefined) continue
    if (wanted !== undefined && found.limiter?.name !== wanted && found.decoded.namespace !== wanted) continue
    for (const hash of found.hashes) targets.push({ found, hash })
  }
  const states: KeyState[] = []
  // Peeks go out together (RedisStore groups them per node); a bounded number at once.
  for (let at = 0; at < targets.length; at += 1000) {
    const batch = targets.slice(at, at + 1000)
    const read = await Promise.all(
      batch.map(({ found, hash }) => {
        const namespace = found.decoded.namespace
        const scope = found.limiter?.overrides.scope
        return inspectStored(connection.store, {
          namespace,
          hash,
          rules: found.rules!,
          ...(scope !== undefined && { overrides: scope }),
        }).then((inspection) => ({ limiter: found.limiter?.name ?? namespace, namespace, hash, inspection }))
      }),
    )
    states.push(...read)
    progress?.(states.length)
  }
  return states
}

/** The raw client keys the override records of `hashes` hold (a record keeps its key), by hash tag. */
export async function rawKeysOf(
  connection: Connection,
  scan: Scan,
  hashes: Iterable<string>,
): Promise<Map<string, string>> {
  const raw = new Map<string, string>()
  for (const hash of hashes) {
    for (const recordKey of scan.records.get(hash) ?? []) {
      const json = await connection.client.get(recordKey)
      const key = json === null ? undefined : (JSON.parse(json) as { key?: unknown }).key
      if (typeof key === 'string') {
        raw.set(hash, key)
        break
      }
    }
  }
  return raw
}
