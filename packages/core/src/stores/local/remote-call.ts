/**
 * The remote-store kit's dispatcher: one store call, as plain data, run on the state a key-value storage keeps (a
 * Durable Object's `ctx.storage`), read → apply (remote.ts, the per-key steps of key-state.ts) → write. With the
 * wire types of a call and its answer, the storage layout (state and lease records, both carrying `expiresAt` for
 * a sweep) and the shard hash that routes a key to its storage. `@ratewindow/cloudflare` is built on it.
 */
import type { Decision, LeaseDecision } from '../types.js'
import {
  acquireLease,
  applyToKeyState,
  type EncodedStoreRequest,
  type KeyState,
  keyStateId,
  type LeaseState,
  releaseLease,
} from './remote.js'

/** One call to a remote store, as the calling side sends it (JSON). */
export type RemoteCall =
  | {
      op: 'consume' | 'peek' | 'refund' | 'charge' | 'reset'
      request: EncodedStoreRequest
      /** The calling store's `clock`, when one is set (tests); otherwise the deciding side's own time. */
      now?: number
    }
  | { op: 'acquire'; prefix: string; key: string; id: string; limit: number; leaseMs: number; now?: number }
  | { op: 'release'; prefix: string; key: string; id: string }

/** The answer to one `RemoteCall` (`error`: the call failed on the deciding side). */
export type RemoteAnswer =
  | { decision: Decision }
  | { charged: number }
  | { lease: LeaseDecision }
  | { done: true }
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
}

/** Storage key prefixes: a client's state (`KeyState`) and its leases (`StoredLeases`). */
const STATE = 's:'
const LEASES = 'l:'

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
  switch (call.op) {
    case 'reset':
      await storage.delete(STATE + keyStateId(call.request))
      return { done: true }
    case 'acquire':
      return update<StoredLeases>(storage, leasesKey(call), (stored) => {
        const { decision, leases } = acquireLease(stored?.leases, call, call.now ?? clock())
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
      return update<KeyState>(storage, STATE + keyStateId(request), (stored) => {
        const result = applyToKeyState(op, request, stored, call.now ?? clock())
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
