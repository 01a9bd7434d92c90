/**
 * The remote-store kit's dispatcher: one store call, as plain data, run on the state a key-value storage keeps (a
 * Durable Object's `ctx.storage`), read → apply (remote.ts, the per-key steps of key-state.ts) → write. With the
 * wire types of a call and its answer, the storage layout (state, lease and override records, each carrying
 * `expiresAt` for a sweep) and the shard hash that routes a key to its storage. `@ratewindow/cloudflare` is built
 * on it.
 */
import {
  applyOverrideChange,
  liveOverrideRecord,
  type OverrideChange,
  type OverrideRecord,
  recordEnd,
} from '../../algorithms/override.js'
import { RateLimitError } from '../../support/errors.js'
import type { Decision, LeaseDecision } from '../types.js'
import { storedClientId } from './client-id.js'
import {
  acquireLease,
  applyToKeyState,
  type EncodedStoreRequest,
  type KeyState,
  keyStateId,
  type LeaseState,
  releaseLease,
} from './remote.js'

/**
 * One call to a remote store, as the calling side sends it (JSON). `now`: the calling store's `clock`, when one is
 * set (tests); otherwise the deciding side's own time.
 */
export type RemoteCall =
  | {
      /** With `request.overrides`, the key's override record is read from the same storage and decided with. */
      op: 'consume' | 'peek' | 'refund' | 'charge' | 'give' | 'reset'
      request: EncodedStoreRequest
      now?: number
    }
  | { op: 'acquire'; prefix: string; key: string; id: string; limit: number; leaseMs: number; now?: number }
  | { op: 'release'; prefix: string; key: string; id: string }
  /** A change to the override record of `key` under `scope` (`Store.updateOverride`); answers `record`. */
  | { op: 'override'; scope: string; key: string; change: OverrideChange; now?: number }
  /** The override record of `key` under `scope` (`Store.readOverride`); answers `record`. */
  | { op: 'read-override'; scope: string; key: string; now?: number }
  /**
   * Up to `count` override records under `scope`, from after the client id `after`; answers `records` and the
   * `after` of the next page (null at the end of this storage).
   */
  | { op: 'list-overrides'; scope: string; after?: string; count: number; now?: number }

/** The answer to one `RemoteCall` (`error`: the call failed on the deciding side). */
export type RemoteAnswer =
  | { decision: Decision }
  | { charged: number }
  | { lease: LeaseDecision }
  | { done: true }
  /** An override record as it stands after the call (null: none). */
  | { record: OverrideRecord | null }
  | { records: OverrideRecord[]; after: string | null }
  | { error: string }

/** A client's leases as the storage keeps them: with the expiry of the last one, for the sweep. */
export interface StoredLeases {
  leases: LeaseState
  expiresAt: number
}

/**
 * The part of a key-value storage `runRemoteCall` uses (a Durable Object's `ctx.storage` has it). Every
 * record it writes carries `expiresAt` (ms): a sweep may delete a record once that has passed.
 */
export interface RemoteStateStorage {
  get(key: string): Promise<unknown>
  put(key: string, value: unknown): Promise<void>
  delete(key: string): Promise<boolean>
  /** The records whose keys start with `prefix`, in key order, after `startAfter`: for `list-overrides` only. */
  list?(options: { prefix: string; startAfter?: string; limit: number }): Promise<Map<string, unknown>>
}

/** An override record as the storage keeps it: with the end of its last part (Infinity: never), for a sweep. */
export interface StoredOverride {
  record: OverrideRecord
  expiresAt: number
}

/**
 * Storage key prefixes: a client's state (`KeyState`), its leases (`StoredLeases`) and its override record under
 * a limiter scope (`StoredOverride`, `o:<scope>\0<client id>`).
 */
const STATE = 's:'
const LEASES = 'l:'
const OVERRIDES = 'o:'

/**
 * Runs one call on `storage`: reads the client's record, decides, writes it back. `clock` gives the
 * deciding side's time (ms), read after the record, unless the call carries its own `now`. Run it where no other
 * call for the same key runs between the read and the write (a Durable Object: the input gate holds other events
 * while storage is read). Writes are not awaited: a Durable Object's output gate holds the answer until they are
 * durable.
 */
export async function runRemoteCall(
  call: RemoteCall,
  storage: RemoteStateStorage,
  clock: () => number,
): Promise<RemoteAnswer> {
  const now = () => (call as { now?: number }).now ?? clock()
  switch (call.op) {
    case 'override':
      return update<StoredOverride>(storage, overrideKey(call.scope, call.key), (stored) => {
        const record = applyOverrideChange(stored?.record, call.key, call.change, now())
        return {
          answer: { record: record ?? null },
          next: record === undefined ? undefined : { record, expiresAt: recordEnd(record) },
          write: record !== undefined || stored !== undefined,
        }
      })
    case 'read-override': {
      const stored = await readOverride(storage, call.scope, call.key)
      return { record: liveOverrideRecord(stored, now()) ?? null }
    }
    case 'list-overrides':
      return listOverrides(storage, call.scope, call.after, call.count, now)
    case 'reset':
      await storage.delete(STATE + keyStateId(call.request))
      return { done: true }
    case 'acquire':
      return update<StoredLeases>(storage, leasesKey(call), (stored) => {
        const { decision, leases } = acquireLease(stored?.leases, call, now())
        return {
          answer: { lease: decision },
          next: leaseRecord(leases),
          write: leases !== undefined || stored !== undefined,
        }
      })
    case 'release':
      return update<StoredLeases>(storage, leasesKey(call), (stored) => {
        if (stored === undefined) return { answer: { done: true }, next: undefined, write: false }
        const leases = releaseLease(stored.leases, call.id)
        return { answer: { done: true }, next: leaseRecord(leases), write: true }
      })
    default: {
      const { op, request } = call
      // The record first: both reads and the write happen before any other call of the storage runs.
      const record =
        request.overrides === undefined
          ? undefined
          : await readOverride(storage, request.overrides, request.key)
      return update<KeyState>(storage, STATE + keyStateId(request), (stored) => {
        const at = now()
        const result = applyToKeyState(op, request, stored, at, liveOverrideRecord(record, at))
        const answer: RemoteAnswer =
          result.decision !== undefined
            ? { decision: result.decision }
            : result.charged !== undefined
              ? { charged: result.charged }
              : { done: true }
        return { answer, next: result.state, write: result.changed }
      })
    }
  }
}

/**
 * One read → apply → write of one storage record: `apply` answers from what was stored and says what to keep
 * (`next`, undefined: delete the record) and whether to write at all. The write is not awaited (see `runRemoteCall`).
 */
async function update<T>(
  storage: RemoteStateStorage,
  key: string,
  apply: (stored: T | undefined) => { answer: RemoteAnswer; next: T | undefined; write: boolean },
): Promise<RemoteAnswer> {
  const stored = (await storage.get(key)) as T | undefined
  const { answer, next, write } = apply(stored)
  if (write) {
    if (next === undefined) void storage.delete(key)
    else void storage.put(key, next)
  }
  return answer
}

/** The storage key of a client's leases (no rules: leases belong to the limiter prefix and key only). */
function leasesKey(call: { prefix: string; key: string }): string {
  return LEASES + keyStateId({ prefix: call.prefix, key: call.key, rules: [] })
}

/** The record of a client's leases, expiring with the last of them; undefined when none is held. */
function leaseRecord(leases: LeaseState | undefined): StoredLeases | undefined {
  return leases === undefined ? undefined : { leases, expiresAt: Math.max(...Object.values(leases)) }
}

/** The storage key of the override record of `key` under `scope`. */
function overrideKey(scope: string, key: string): string {
  return `${OVERRIDES}${scope}\u0000${storedClientId(key)}`
}

/** The record of `key` under `scope` as stored, ended parts included (`liveOverrideRecord` drops them). */
async function readOverride(
  storage: RemoteStateStorage,
  scope: string,
  key: string,
): Promise<OverrideRecord | undefined> {
  return ((await storage.get(overrideKey(scope, key))) as StoredOverride | undefined)?.record
}

/**
 * A page of the live records under `scope`, in key order, from after the client id `after`; the `after` of the
 * next page, or null once this storage holds no more. A page may hold fewer than `count` (ended records are left
 * out) before the end.
 */
async function listOverrides(
  storage: RemoteStateStorage,
  scope: string,
  after: string | undefined,
  count: number,
  now: () => number,
): Promise<RemoteAnswer> {
  if (storage.list === undefined)
    throw new RateLimitError('ERR_RATEWINDOW_STORE', 'listing overrides needs a storage with `list`')
  const prefix = `${OVERRIDES}${scope}\u0000`
  const limit = Math.max(1, Math.min(count, 1_000))
  const page = await storage.list(
    after === undefined ? { prefix, limit } : { prefix, startAfter: prefix + after, limit },
  )
  const at = now()
  const records: OverrideRecord[] = []
  let last: string | undefined
  for (const [id, value] of page) {
    last = id
    const record = liveOverrideRecord((value as StoredOverride | undefined)?.record, at)
    if (record !== undefined) records.push(record)
  }
  return { records, after: page.size < limit || last === undefined ? null : last.slice(prefix.length) }
}

/**
 * Which of `shards` storages holds a client's state: FNV-1a over the limiter prefix and the key. Changing
 * `shards` moves keys (their counts restart).
 */
export function remoteShardOf(target: { prefix: string; key: string }, shards: number): number {
  if (shards === 1) return 0
  const text = `${target.prefix}\u0000${target.key}`
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return (hash >>> 0) % shards
}
