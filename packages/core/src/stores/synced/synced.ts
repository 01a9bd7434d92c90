import type { OverrideChange, OverrideRecord } from '../../algorithms/override.js'
import type { Rule } from '../../algorithms/types.js'
import { RateLimitError } from '../../support/errors.js'
import { mirroredByDecideInto } from '../local/decide.js'
import type { RedisScriptRunner } from '../redis/clients/index.js'
import { clusterSlot } from '../redis/cluster-slot.js'
import { overrideRecordKey } from '../redis/overrides.js'
import { storedHash } from '../redis/stored-keys.js'
import type {
  Awaitable,
  Charged,
  Decision,
  DecisionRecord,
  OverridePage,
  RefundRequest,
  Store,
  StoreRequest,
  StoreTarget,
} from '../types.js'
import { Departures } from './departures.js'
import {
  changeRecord,
  chargeFromView,
  decideFromView,
  decideFromViewInto,
  newEntry,
  recordAdmitted,
  recordGiven,
  recordRefund,
  type SyncEntry,
} from './entry.js'
import { ExitSend } from './exit.js'
import { FailureMode } from './failure-mode.js'
import { parseSyncedStoreOptions, type SyncedStoreOptions } from './options.js'
import { scriptRunnerOn } from './script.js'
import { SyncLoop } from './sync-loop.js'
import { SyncedTables } from './tables.js'

export { SYNCED_STORE_DEFAULTS, type SyncedRedisClient, type SyncedStoreOptions } from './options.js'

/**
 * Synchronised local mode: each process decides from its own view of the shared counts, and reconciles with
 * Redis every `interval` (every key it used, together: up to 256 per round trip, one hash slot each on a Cluster),
 * or for one key as soon as it holds `maxPending` unacknowledged units of it.
 * Every process sees every other's counts within one interval; the limit can be passed by at most
 * (processes − 1) × `maxPending` per window (docs/algorithms.md derives it). For the endpoints where
 * throughput matters more than the last few requests of exactness.
 *
 * Synchronises the sliding window counter and the fixed window. A rule set with any other algorithm is
 * decided by an exact `RedisStore` on the same client, one round trip per request.
 *
 * Overrides and manual blocks (docs/operating-limits.md) live in Redis as RedisStore keeps them (the same records:
 * a RedisStore process and a SyncedStore process with the same `prefix` see each other's): a change is written at
 * once, and seen here at once; every sync of a key reads its record, so another process sees it at its next sync
 * of that key. Decisions read the record as last synced: no round trip of their own.
 *
 * Its parts, in this folder: its options (options.ts), the held keys (tables.ts) and each key's view, counts and
 * override record (entry.ts), the sync loop (sync-loop.ts), the failure mode and exact fallback (failure-mode.ts),
 * the departing keys (departures.ts) and the send on the process's `beforeExit` (exit.ts). The class composes them: a call finds its key, decides from the view,
 * records what it admitted, and waits for a sync only past `maxPending` or for a key never read.
 */
export class SyncedStore implements Store {
  /** Overrides and manual blocks: written through to Redis, read by each sync (docs/operating-limits.md). */
  readonly overrides = true
  /** Quota rules are decided by the exact RedisStore on the same client, as every rule but the counters. */
  readonly quotas = true
  /** A planned limiter's keys are decided by the exact RedisStore on the same client (the plan recorded there). */
  readonly plans = true
  readonly #commands: RedisScriptRunner
  readonly #prefix: string
  readonly #maxPending: number | undefined
  readonly #onError: (error: unknown) => void
  readonly #tables: SyncedTables
  readonly #departures = new Departures()
  readonly #failure: FailureMode
  readonly #loop: SyncLoop
  /** Sends what is unsent on the process's `beforeExit` (exit.ts). */
  readonly #exit: ExitSend

  constructor(options: SyncedStoreOptions) {
    const { client, commands, prefix, intervalMs, maxPending, maxStale, maxKeys, clock, onError, runner } =
      parseSyncedStoreOptions(options)
    this.#commands = commands
    this.#prefix = prefix
    this.#maxPending = maxPending
    this.#onError = onError
    this.#tables = new SyncedTables(maxKeys)
    this.#failure = new FailureMode(maxStale, { client, prefix, clock }, () => this.#loop.now())
    this.#loop = new SyncLoop({
      runner: runner ?? scriptRunnerOn(commands),
      cluster: commands.cluster,
      interval: intervalMs,
      clock,
      onError: this.#onError,
      failure: this.#failure,
      departures: this.#departures,
    })
    this.#exit = new ExitSend(this.#loop, this.#departures, maxStale, this.#onError)
  }

  /** Number of keys held in this process. */
  get size(): number {
    return this.#tables.size
  }

  consume(request: StoreRequest): Decision | Promise<Decision> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#failure.exact().consume(request)
    this.#failure.checkReachable()
    // A key this process has not read from Redis yet (new, or evicted and acknowledged since): its view is
    // empty, so it reads the shared counts before admitting anything, or it could pass the bound once per cold
    // start (docs/algorithms.md).
    if (entry.syncedAt === Number.NEGATIVE_INFINITY) return this.#consumeAfterSync(entry, request)
    const decision = decideFromView(entry, this.#loop.now(), request.cost, true)
    // A key in use is read back once per interval, even when this process only denies it.
    this.#loop.markDirty(entry)
    if (!decision.allowed) return decision
    if (entry.unacked > 0 && entry.unacked + request.cost > entry.maxPending)
      return this.#consumeAfterSync(entry, request)
    this.#record(entry, decision.now, request.cost)
    return decision
  }

  /**
   * @internal `consume` from this process's view, written into the caller's record (`Store.decideInto`); a request
   * that reads overrides, reserves, or must sync first (a key not read yet, too much unacknowledged) goes to
   * `consume`.
   */
  decideInto(request: StoreRequest, into: DecisionRecord): boolean {
    if (request.overrides !== undefined || request.reserve !== undefined) return false
    const entry = this.#entryFor(request)
    if (entry === undefined || entry.syncedAt === Number.NEGATIVE_INFINITY) return false
    if (entry.unacked > 0 && entry.unacked + request.cost > entry.maxPending) return false
    this.#failure.checkReachable()
    decideFromViewInto(entry, this.#loop.now(), request.cost, into)
    this.#loop.markDirty(entry)
    if (into.allowed) this.#record(entry, into.now, request.cost)
    return true
  }

  peek(request: StoreRequest): Decision | Promise<Decision> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#failure.exact().peek(request)
    this.#failure.checkReachable()
    // A key this process has not read from Redis yet: its empty view would report the whole limit free.
    if (entry.syncedAt === Number.NEGATIVE_INFINITY)
      return this.#afterSync(entry, () => decideFromView(entry, this.#loop.now(), request.cost, false))
    this.#loop.markDirty(entry)
    return decideFromView(entry, this.#loop.now(), request.cost, false)
  }

  refund(request: RefundRequest): void | Promise<void> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#failure.exact().refund(request)
    recordRefund(entry, request.rules, request.at, request.cost)
    this.#loop.markDirty(entry)
  }

  /** `RateLimiter.give`: gives units back now, in this process's counts (sent with the next sync). */
  give(request: StoreRequest): Awaitable<void> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#failure.exact().give(request)
    this.#failure.checkReachable()
    const give = () => {
      recordGiven(entry, this.#loop.now(), request.cost)
      this.#loop.markDirty(entry)
      return true
    }
    // A key not read yet: its empty view knows of nothing to give back.
    if (entry.syncedAt === Number.NEGATIVE_INFINITY) return this.#afterSync(entry, give).then(() => {})
    give()
  }

  /**
   * Charges as much of `cost` as every rule still admits (`take`, `settle`), from this process's view as `consume`
   * decides: after a sync for a key not read yet, or past `maxPending`.
   */
  charge(request: StoreRequest): Awaitable<Charged> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#failure.exact().charge(request)
    this.#failure.checkReachable()
    const charge = (): Charged => {
      const now = this.#loop.now()
      const { charged, decision } = chargeFromView(entry, now, request.cost, request.maxDebt)
      if (charged > 0) this.#record(entry, now, charged)
      else this.#loop.markDirty(entry)
      return { charged, outcomes: decision.outcomes, now }
    }
    const cold = entry.syncedAt === Number.NEGATIVE_INFINITY
    if (cold || (entry.unacked > 0 && entry.unacked + request.cost > entry.maxPending))
      return this.#afterSync(entry, charge)
    return charge()
  }

  /**
   * Writes the change to the key's record in Redis (RedisStore's script, on this store's clock), then applies it to
   * this process's entries of the key at once; other processes read it at their next sync of the key.
   */
  async updateOverride(
    scope: string,
    key: string,
    change: OverrideChange,
  ): Promise<OverrideRecord | undefined> {
    const record = await this.#failure.exact().updateOverride(scope, key, change)
    for (const entry of this.#tables.entriesOf(scope, key)) changeRecord(entry, record)
    for (const entry of this.#departures.entries())
      if (entry.target.overrides === scope && entry.target.key === key) changeRecord(entry, record)
    return record
  }

  /** The key's record as Redis holds it now (one round trip, not this process's copy). */
  readOverride(scope: string, key: string): Promise<OverrideRecord | undefined> {
    return this.#failure.exact().readOverride(scope, key)
  }

  /** A page of the scope's records, as RedisStore lists them (SCAN). */
  listOverrides(scope: string, page: { cursor?: string | undefined; count: number }): Promise<OverridePage> {
    return this.#failure.exact().listOverrides(scope, page)
  }

  /**
   * Forgets the key's counts: in Redis, and in this process under every override scope (a limiter's `reset` names
   * none), so that no held view or unsent count brings them back. Its override record stays.
   */
  async reset(target: StoreTarget): Promise<void> {
    const held = this.#tables.heldOf(target)
    if (held === undefined) return this.#failure.exact().reset(target)
    for (const entry of held) this.#tables.remove(entry)
    const hash = storedHash(target.key)
    await this.#commands.del(target.rules.map((rule) => this.#counterKey(target.prefix, hash, rule)))
  }

  /**
   * Runs one interval's reconciliation now: every key with unsent counts, or used since its previous sync, sends
   * them and reads back the shared counts, in as few scripts as the keys allow (up to 256 keys each; on a
   * Cluster, one script per hash slot). Rejects with the first failure.
   */
  sync(): Promise<void> {
    return this.#loop.sync()
  }

  /**
   * Stops the timer and sends every unsent count. The client stays open: it is yours, to close after this store
   * (docs/shutdown.md). Without it, a process that ends by itself sends them on `beforeExit`, but
   * `process.exit()`, a signal without a handler and SIGKILL lose up to `maxPending` units per key. Resolves what
   * could not be sent: `{ unsynced: 0 }` when every count reached Redis; else the cost units admitted here and
   * never sent (e.g. the client was closed first), lost to the shared counts, which `onError` also hears of.
   */
  async close(): Promise<{ unsynced: number }> {
    this.#loop.stop()
    this.#exit.stop()
    let failure: unknown
    let failed = false
    await this.sync().catch((error: unknown) => {
      failed = true
      failure = error
    })
    await this.#failure.close()
    if (!failed) return { unsynced: 0 }
    const unsynced = this.#exit.unsynced()
    const reason = failure instanceof Error ? failure.message : String(failure)
    this.#onError(
      new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        `SyncedStore.close() could not send ${unsynced} counted cost unit${unsynced === 1 ? '' : 's'} to Redis (${reason}): other processes never see them. Close the SyncedStore before its Redis client (docs/shutdown.md).`,
        { cause: failure },
      ),
    )
    return { unsynced }
  }

  /** The Redis key holding `rule`'s shared counts for `key` under a limiter `prefix`. */
  keyFor(prefix: string, key: string, rule: Rule): string {
    return this.#counterKey(prefix, storedHash(key), rule)
  }

  #counterKey(prefix: string, hash: string, rule: Rule): string {
    return `${this.#prefix}${prefix}{${hash}}:${rule.id}:s`
  }

  /**
   * A request past `maxPending`, or the first for a key not yet read from Redis: waits for the round trip that
   * acknowledges what is pending and reads the shared counts, then decides. Under many concurrent requests for one
   * key each round trip admits up to `maxPending` of them; the limiter's `timeout` bounds the wait.
   */
  #consumeAfterSync(entry: SyncEntry, request: StoreRequest): Promise<Decision> {
    return this.#afterSync(entry, () => {
      const decision = decideFromView(entry, this.#loop.now(), request.cost, true)
      if (!decision.allowed) return decision
      if (entry.unacked === 0 || entry.unacked + request.cost <= entry.maxPending) {
        this.#record(entry, decision.now, request.cost)
        return decision
      }
      return undefined
    })
  }

  /**
   * Waits for the round trip that sends what is pending for the key and reads its shared counts, then answers by
   * `decide`; again while `decide` has no answer yet (undefined: past `maxPending` still).
   */
  async #afterSync<T>(entry: SyncEntry, decide: () => T | undefined): Promise<T> {
    // Evicted meanwhile, the entry stays the key's (departing) while requests wait on it: it decides them.
    entry.waiting++
    try {
      for (;;) {
        entry.dirty = false
        await this.#loop.flush(entry)
        this.#failure.checkReachable()
        const decision = decide()
        if (decision !== undefined) return decision
      }
    } finally {
      entry.waiting--
      if (!entry.held) this.#departures.settle(entry)
    }
  }

  /** Counts an admitted request; past `maxPending` unacknowledged units, sends the key at once. */
  #record(entry: SyncEntry, now: number, cost: number): void {
    recordAdmitted(entry, now, cost)
    if (entry.unacked >= entry.maxPending && entry.flushing === undefined) {
      entry.dirty = false
      this.#loop.flush(entry).catch(this.#onError)
    } else this.#loop.markDirty(entry)
  }

  /**
   * The entry of a target whose rules can be synchronised (undefined when they cannot): the one held, else the
   * departing one taken back, else a new one (evicting the least recently used past `maxKeys`).
   */
  #entryFor(target: StoreTarget): SyncEntry | undefined {
    // A planned limiter's keys are decided by the exact RedisStore, which records the plan in the same call.
    if (target.plan !== undefined) return undefined
    const table = this.#tables.tableOf(target)
    if (table === undefined) return undefined
    let entry = table.get(target.key)
    if (entry === undefined) {
      const oldest = this.#tables.overflow
      if (oldest !== undefined) this.#evict(oldest)
      entry = this.#departures.takeBack(table, target.key) ?? this.#create(table, target)
      this.#tables.hold(entry)
    }
    this.#tables.touch(entry)
    return entry
  }

  #create(table: Map<string, SyncEntry>, target: StoreTarget): SyncEntry {
    const hash = storedHash(target.key)
    const keys = target.rules.map((rule) => this.#counterKey(target.prefix, hash, rule))
    const scope = target.overrides
    const record = scope === undefined ? undefined : overrideRecordKey(this.#prefix, scope, hash)
    const slot = this.#commands.cluster ? clusterSlot(keys[0]!) : 0
    return newEntry(table, target, keys, record, slot, this.#maxPending)
  }

  /**
   * Drops the least recently used key; what it admitted still goes to Redis. Until Redis has acknowledged it, and
   * while requests wait on it, the entry stays among the departing, to be taken back if its key is used again:
   * one entry per key at any time, so that no fresh view ignores what an older one admitted.
   */
  #evict(entry: SyncEntry): void {
    this.#tables.remove(entry)
    if (this.#departures.add(entry) && entry.unacked > 0) this.#loop.flushLater(entry)
  }
}

mirroredByDecideInto(SyncedStore.prototype.consume)
