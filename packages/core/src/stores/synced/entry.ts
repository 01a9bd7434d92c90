/**
 * One client key as a SyncedStore process holds it: the shared counts it last read from Redis, the counts it
 * admitted since (sent and not yet acknowledged, or not yet sent), its override record as last read (a limiter
 * with `overrides: true`), and the local decision made from their sum under that record.
 */
import { liveOverrideRecord, type OverrideRecord, rulesWith } from '../../algorithms/override.js'
import type { Rule } from '../../algorithms/types.js'
import { chargeLocally, decideInto, decideLocally } from '../local/decide.js'
import { blockedDecision, underOverride } from '../local/key-state.js'
import type { Linked } from '../local/recency.js'
import { parseRecord } from '../redis/overrides.js'
import type { Decision, DecisionRecord, StoreTarget } from '../types.js'
import {
  addCounts,
  COUNTER_STATES,
  countIn,
  emptyCounts,
  newestWindow,
  type StateWriter,
  type WindowCounts,
} from './counters.js'

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
  /** Scratch per rule for charges: the units carried from the window before, then the debt each may owe. */
  readonly carried: number[]
  flushing: Promise<void> | undefined
  /** Requests waiting for a sync of this entry before they are decided (SyncedStore's `#consumeAfterSync`). */
  waiting: number
  /** Used or admitted since its last sync: listed for the next tick. */
  dirty: boolean
  /** Still in its table (false once reset or evicted). */
  held: boolean
  /**
   * With `target.overrides` (the limiter's override scope): the Redis key of the client key's override record, read
   * by every sync of the entry. Undefined for a limiter without overrides: no record is read.
   */
  readonly recordKey: string | undefined
  /** The record as the last sync read it, or as this process last changed it; its ended parts still in. */
  record: OverrideRecord | undefined
  /** The record's JSON as the last sync read it ('' for none): an unchanged one keeps its object (and its rules). */
  recordJson: string
  /** Changed by this process after the sync in flight was sent: that sync may have read the record before. */
  recordChanged: boolean
}

/**
 * @internal A new entry for `target` in `table`, never synced yet: `keys` are its rules' Redis keys, `recordKey` its
 * override record's (with `target.overrides`), `maxPending` the store's option (by default 1% of the smallest coded
 * limit of its rules, at least 1).
 */
export function newEntry(
  table: Map<string, SyncEntry>,
  target: StoreTarget,
  keys: string[],
  recordKey: string | undefined,
  slot: number,
  maxPending: number | undefined,
): SyncEntry {
  const { rules, overrides } = target
  const smallest = Math.min(...rules.map((rule) => rule.limit))
  return {
    table,
    target:
      overrides === undefined
        ? { prefix: target.prefix, key: target.key, rules }
        : { prefix: target.prefix, key: target.key, rules, overrides },
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
    carried: rules.map(() => 0),
    flushing: undefined,
    waiting: 0,
    dirty: false,
    held: true,
    older: undefined,
    newer: undefined,
    recordKey,
    record: undefined,
    recordJson: '',
    recordChanged: false,
  }
}

/** @internal Whether every rule of a rule set keeps counts per fixed window, which SyncedStore can synchronise. */
export function canSync(rules: readonly Rule[]): boolean {
  return rules.every((rule) => COUNTER_STATES[rule.algorithm] !== undefined)
}

/**
 * @internal The decision from this process's view: the last synced counts plus what it admitted since, under the
 * override record as last read (its limits in force; a manual block refuses, counting nothing). `consume`: the
 * outcome is reported as after the request (admitted, written by `recordAdmitted`); a peek's is not.
 */
export function decideFromView(entry: SyncEntry, now: number, cost: number, consume: boolean): Decision {
  const coded = entry.target.rules
  const record = entry.recordKey === undefined ? undefined : liveOverrideRecord(entry.record, now)
  const rules = writeStates(entry, now, record)
  const { states } = entry
  const decision =
    record?.block !== undefined
      ? blockedDecision(rules, states, now, cost, record.block)
      : decideLocally(rules, states, now, cost, false, undefined, undefined, consume)
  return record === undefined ? decision : underOverride(decision, coded, rules, record)
}

/**
 * @internal `decideFromView` of a consume by a limiter that reads no override record, written into `into` (the local
 * path, `Store.decideInto`).
 */
export function decideFromViewInto(entry: SyncEntry, now: number, cost: number, into: DecisionRecord): void {
  const rules = writeStates(entry, now, undefined)
  decideInto(into, rules, entry.states, now, cost, false, undefined, undefined, true)
}

/**
 * @internal Charges `cost` in this process's view as far as it leaves no rule more than its debt past its limit
 * (`chargeLocally`), under the limits in force (a manual block does not stop it, as in every store); returns the
 * units charged, for `recordAdmitted`, and the decision after the charge. NOTE: the shared counts keep two windows,
 * so a fixed window carries what one window counted beyond its limit into the next one and no further: a rule owes
 * one limit at most, and nothing while it carries a debt from the window before (that debt would not be carried
 * again), so that what is charged is all carried at the rule's rate and the rest reported uncharged.
 */
export function chargeFromView(
  entry: SyncEntry,
  now: number,
  cost: number,
  maxDebt: number | undefined,
): { charged: number; decision: Decision } {
  const record = entry.recordKey === undefined ? undefined : liveOverrideRecord(entry.record, now)
  const inForce = writeStates(entry, now, record, entry.carried)
  const carried = entry.carried
  for (let i = 0; i < inForce.length; i++) carried[i] = carried[i]! > 0 ? 0 : inForce[i]!.limit
  return chargeLocally(inForce, entry.states, now, cost, maxDebt, carried)
}

/**
 * Writes the entry's algorithm states from its counts at `now`; returns the rules in force under `record` (the
 * coded ones when it has no limits; an override keeps each rule's window, so the states are the same). `carried`,
 * when given, receives per rule the units its state carries from the window before (`StateWriter`).
 */
function writeStates(
  entry: SyncEntry,
  now: number,
  record: OverrideRecord | undefined,
  carried?: number[],
): readonly Rule[] {
  const { rules } = entry.target
  const { writers, states, views, sent, unsent } = entry
  const inForce = record === undefined ? rules : rulesWith(rules, record.limits)
  for (let i = 0; i < rules.length; i++) {
    const win = windowOf(entry, i, now)
    const units = writers[i]!(states[i], win, views[i]!, sent[i]!, unsent[i]!, inForce[i]!.limit)
    if (carried !== undefined) carried[i] = units
  }
  return inForce
}

/**
 * The window of rule `i` that a decision, an admission or a give at `now` counts in: `now`'s, or a later one the key
 * already counts in. NOTE: only forward, as each algorithm's `advance` (docs/algorithms.md, "Clocks that step
 * back"): after a clock steps back across a boundary, or in a process whose clock is behind the one whose counts
 * it read, the key stays in its newer window, and the elapsed time in it is negative (the previous window weighs a
 * little more, never less). Moving the key back to the older window would start a count beside the newer one's.
 */
function windowOf(entry: SyncEntry, i: number, now: number): number {
  return Math.max(
    Math.floor(now / entry.target.rules[i]!.windowMs),
    newestWindow(entry.views[i]!, entry.sent[i]!, entry.unsent[i]!),
  )
}

/**
 * @internal Gives up to `cost` units back to every rule now, as far as this process knows them counted in the
 * rule's current window (what `give` does for the counter algorithms: a refund at now), among the unsent counts.
 */
export function recordGiven(entry: SyncEntry, now: number, cost: number): void {
  const { rules } = entry.target
  for (let i = 0; i < rules.length; i++) {
    const win = windowOf(entry, i, now)
    const held = countIn(win, entry.views[i]!, entry.sent[i]!, entry.unsent[i]!)
    if (held > 0) addCounts(entry.unsent[i]!, win, -Math.min(cost, held))
  }
}

/** @internal The record a sync read (its JSON, '' for none), unless this process changed it since that sync left. */
export function readRecord(entry: SyncEntry, reply: unknown): void {
  if (entry.recordChanged) return
  const json = typeof reply === 'string' ? reply : ''
  if (json === entry.recordJson) return
  entry.recordJson = json
  entry.record = parseRecord(json)
}

/** @internal The record as this process changed it (in Redis already): decisions here read it from now on. */
export function changeRecord(entry: SyncEntry, record: OverrideRecord | undefined): void {
  entry.record = record
  // The next sync reads it again, and takes what Redis then holds.
  entry.recordJson = '\u0000'
  entry.recordChanged = entry.flushing !== undefined
}

/** @internal Counts `cost` units admitted at `now` among the entry's unsent ones (and its unacknowledged cost). */
export function recordAdmitted(entry: SyncEntry, now: number, cost: number): void {
  const { rules } = entry.target
  for (let i = 0; i < rules.length; i++) addCounts(entry.unsent[i]!, windowOf(entry, i, now), cost)
  entry.unacked += cost
}

/** @internal Counts a refund of `cost` units admitted at `at` (under `rules`) among the entry's unsent ones. */
export function recordRefund(entry: SyncEntry, rules: readonly Rule[], at: number, cost: number): void {
  rules.forEach((rule, i) => {
    addCounts(entry.unsent[i]!, Math.floor(at / rule.windowMs), -cost)
  })
}
