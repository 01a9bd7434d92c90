/**
 * One client key as a SyncedStore process holds it: the shared counts it last read from Redis, the counts it
 * admitted since (sent and not yet acknowledged, or not yet sent), and the local decision made from their sum.
 */
import type { Rule } from '../../algorithms/types.js'
import { decideLocally } from '../local/decide.js'
import type { Linked } from '../local/recency.js'
import type { Decision, StoreTarget } from '../types.js'
import { addCounts, COUNTER_STATES, emptyCounts, type StateWriter, type WindowCounts } from './counters.js'

/** @internal A client key held by a SyncedStore (see the file's comment). */
export interface SyncEntry extends Linked<SyncEntry> {
  /** The table holding the entry (one per rule set and limiter prefix), and its key there. */
  readonly table: Map<string, SyncEntry>
  readonly target: StoreTarget
  readonly keys: string[]
  /** The Cluster slot of `keys` (one hash tag), on a Cluster client; 0 otherwise. */
  readonly slot: number
  /** One state writer per rule. */
  readonly writers: StateWriter[]
  /** Global counts per rule at the last sync, this process's acknowledged counts included. */
  readonly views: WindowCounts[]
  /**
   * Counts sent and not yet acknowledged, and counts not yet sent: two sets of records swapped by each sync
   * and emptied in place, so that neither a decision nor a sync allocates them.
   */
  sent: WindowCounts[]
  unsent: WindowCounts[]
  /** Cost admitted here that Redis has not acknowledged (sent or not). */
  unacked: number
  sentCost: number
  /** When the views were last read from Redis (this store's clock). */
  syncedAt: number
  readonly maxPending: number
  /** Scratch algorithm states for decisions. */
  readonly states: unknown[]
  flushing: Promise<void> | undefined
  /** Requests waiting for a sync of this entry before they are decided (SyncedStore's `#consumeAfterSync`). */
  waiting: number
  /** Used or admitted since its last sync: listed for the next tick. */
  dirty: boolean
  /** Still in its table (false once reset or evicted). */
  held: boolean
}

/**
 * @internal A new entry for `target` in `table`, never synced yet: `keys` are its rules' Redis keys, `maxPending`
 * the store's option (by default 1% of the smallest limit of its rules, at least 1).
 */
export function newEntry(
  table: Map<string, SyncEntry>,
  target: StoreTarget,
  keys: string[],
  slot: number,
  maxPending: number | undefined,
): SyncEntry {
  const { rules } = target
  const smallest = Math.min(...rules.map((rule) => rule.limit))
  return {
    table,
    target: { prefix: target.prefix, key: target.key, rules },
    keys,
    slot,
    writers: rules.map((rule) => COUNTER_STATES[rule.algorithm]!),
    views: rules.map(emptyCounts),
    sent: rules.map(emptyCounts),
    unsent: rules.map(emptyCounts),
    unacked: 0,
    sentCost: 0,
    syncedAt: Number.NEGATIVE_INFINITY,
    maxPending: maxPending ?? Math.max(1, Math.floor(smallest / 100)),
    states: rules.map((rule) => rule.logic.create()),
    flushing: undefined,
    waiting: 0,
    dirty: false,
    held: true,
    older: undefined,
    newer: undefined,
  }
}

/** @internal Whether every rule of a rule set keeps counts per fixed window, which SyncedStore can synchronise. */
export function canSync(rules: readonly Rule[]): boolean {
  return rules.every((rule) => COUNTER_STATES[rule.algorithm] !== undefined)
}

/**
 * @internal The decision from this process's view: the last synced counts plus what it admitted since. `consume`:
 * the outcome is reported as after the request (admitted, written by `recordAdmitted`); a peek's is not.
 */
export function decideFromView(entry: SyncEntry, now: number, cost: number, consume: boolean): Decision {
  const { rules } = entry.target
  const { writers, states, views, sent, unsent } = entry
  for (let i = 0; i < rules.length; i++) {
    writers[i]!(states[i], Math.floor(now / rules[i]!.windowMs), views[i]!, sent[i]!, unsent[i]!)
  }
  return decideLocally(rules, states, now, cost, false, undefined, undefined, consume)
}

/** @internal Counts `cost` units admitted at `now` among the entry's unsent ones (and its unacknowledged cost). */
export function recordAdmitted(entry: SyncEntry, now: number, cost: number): void {
  const { rules } = entry.target
  for (let i = 0; i < rules.length; i++) {
    addCounts(entry.unsent[i]!, Math.floor(now / rules[i]!.windowMs), cost)
  }
  entry.unacked += cost
}

/** @internal Counts a refund of `cost` units admitted at `at` (under `rules`) among the entry's unsent ones. */
export function recordRefund(entry: SyncEntry, rules: readonly Rule[], at: number, cost: number): void {
  rules.forEach((rule, i) => {
    addCounts(entry.unsent[i]!, Math.floor(at / rule.windowMs), -cost)
  })
}
