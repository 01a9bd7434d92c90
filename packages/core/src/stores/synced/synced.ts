import type { Rule } from '../../algorithms/types.js'
import { type Duration, parseDuration } from '../../support/duration.js'
import { invalid, RateLimitError, requireObject } from '../../support/errors.js'
import { sha256Base64url } from '../../support/hash.js'
import { namesOf, rejectUnknownOptions } from '../../support/option-names.js'
import { throttledErrorLog } from '../../support/report.js'
import { emitWarning } from '../../support/runtime.js'
import { realClearTimeout, realSetTimeout } from '../../time/real-timers.js'
import { decideLocally } from '../local/decide.js'
import { type Linked, RecencyList } from '../local/recency.js'
import { type RedisClient, type RedisScriptRunner, scriptRunnerFor } from '../redis/clients/index.js'
import { clusterSlot } from '../redis/cluster-slot.js'
import { RedisStore } from '../redis/redis.js'
import type { Decision, RefundRequest, Store, StoreRequest, StoreTarget } from '../types.js'
import {
  addCounts,
  COUNTER_STATES,
  clearCounts,
  emptyCounts,
  mergeCounts,
  type StateWriter,
  type WindowCounts,
} from './counters.js'
import { type ScriptRunner, SYNC_SCRIPT, scriptRunnerOn } from './script.js'

/** @deprecated `SyncedStore` takes every client `RedisStore` takes: use `RedisClient`. */
export type SyncedRedisClient = RedisClient

export interface SyncedStoreOptions {
  /**
   * A connected client, standalone or Cluster: every client `RedisStore` accepts (ioredis or iovalkey,
   * node-redis, Valkey GLIDE, or a `RedisScriptRunner`), configured as docs/redis.md says.
   */
  client: RedisClient
  /** Prepended to every key. @default '' */
  prefix?: string
  /**
   * How often each process sends its counts to Redis and reads everyone's back, for every key it used since (in
   * scripts of up to 256 keys). @default '100ms'
   */
  interval?: Duration
  /**
   * Most cost units one process admits for one key that Redis has not yet acknowledged; reaching it sends them
   * at once, and a request past it waits for that round trip. With P processes, at most (P − 1) × maxPending
   * pass beyond the limit (docs/algorithms.md). @default 1% of the smallest limit of the key's rules, at least 1
   */
  maxPending?: number
  /**
   * How long decisions go on from the last known counts while Redis fails (each process still admits at most
   * `maxPending` per key meanwhile); after it, every call fails so that the limiter's failure policy answers.
   * @default '2s'
   */
  maxStale?: Duration
  /** Most keys held in this process; the least recently used is sent to Redis and dropped. @default 100_000 */
  maxKeys?: number
  /** Receives failures of syncs no request waits for (timer, eviction, close). @default a throttled console.error */
  onError?: (error: unknown) => void
  /** Client-side time in epoch ms, for tests and simulations. By default, the Redis server's `TIME`. */
  clock?: () => number
  /** @internal Sends the script; by default EVALSHA on `client`. */
  runner?: ScriptRunner
}

const SYNCED_STORE_OPTIONS = namesOf<SyncedStoreOptions>({
  client: true,
  prefix: true,
  interval: true,
  maxPending: true,
  maxStale: true,
  maxKeys: true,
  onError: true,
  clock: true,
  runner: true,
})
/** `SyncedStoreOptions`' defaults, in one place (`maxPending` follows from the limit: see its doc). */
export const SYNCED_STORE_DEFAULTS = {
  prefix: '',
  interval: '100ms',
  maxStale: '2s',
  maxKeys: 100_000,
} as const satisfies Partial<SyncedStoreOptions>

interface Entry extends Linked<Entry> {
  /** The table holding the entry (one per rule set and limiter prefix), and its key there. */
  readonly table: Map<string, Entry>
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
  /** Requests waiting for a sync of this entry before they are decided (`#consumeAfterSync`). */
  waiting: number
  /** Used or admitted since its last sync: listed for the next tick. */
  dirty: boolean
  /** Still in its table (false once reset or evicted). */
  held: boolean
}

/**
 * Most keys one sync script carries. A tick sends every key used in the interval in a few scripts rather than
 * one each (each script runs atomically, so this also caps how long one holds the server: ~1 ms).
 */
const BATCH_KEYS = 256

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
 */
export class SyncedStore implements Store {
  readonly #client: RedisClient
  readonly #commands: RedisScriptRunner
  readonly #runner: ScriptRunner
  readonly #prefix: string
  readonly #interval: number
  readonly #maxPending: number | undefined
  readonly #maxStale: number
  readonly #maxKeys: number
  readonly #onError: (error: unknown) => void
  readonly #clock: (() => number) | undefined
  /**
   * One table per rule set (by storage ids) and limiter prefix, keyed by the client key itself, as in
   * MemoryStore: no per-request key concatenation. `null`: rules that cannot be synchronised.
   */
  readonly #tables = new WeakMap<readonly Rule[], Map<string, Map<string, Entry>> | null>()
  readonly #bySignature = new Map<string, Map<string, Map<string, Entry>>>()
  #size = 0
  /**
   * Evicted entries whose admissions Redis has not acknowledged yet, per table and key: a request for such a key
   * takes its entry back (with its view and pending counts) rather than starting from an empty view that knows
   * nothing of them.
   */
  readonly #departing = new Map<Map<string, Entry>, Map<string, Entry>>()
  /** Entries marked dirty since the last tick (an entry whose mark was cleared meanwhile is skipped). */
  #dirty: Entry[] = []
  /**
   * The sync timer, started when a key is first marked for a sync (Workers forbid timers in global scope, where a
   * store is usually made); null once closed.
   */
  #timer: ReturnType<typeof realSetTimeout> | undefined | null
  readonly #recency = new RecencyList<Entry>()
  /** Server time minus local time, learned from each sync (without `clock`). */
  #offset = 0
  #failingSince: number | undefined
  #lastError: unknown
  #exact: RedisStore | undefined
  /** Called on the process's `beforeExit`: sends what is unsent (see `#sendBeforeExit`). */
  readonly #exitHook = () => this.#sendBeforeExit()
  #exitSync: Promise<void> | undefined
  /** The last `beforeExit` send failed: no other is tried (each failure would bring `beforeExit` back). */
  #exitFailed = false

  constructor(options: SyncedStoreOptions) {
    requireObject(options, 'options', "{ client: new Redis(), interval: '100ms' }")
    rejectUnknownOptions(options, SYNCED_STORE_OPTIONS, 'SyncedStore')
    const {
      client,
      prefix = SYNCED_STORE_DEFAULTS.prefix,
      interval = SYNCED_STORE_DEFAULTS.interval,
      maxPending,
      maxStale = SYNCED_STORE_DEFAULTS.maxStale,
      maxKeys = SYNCED_STORE_DEFAULTS.maxKeys,
    } = options
    const commands = scriptRunnerFor(client)
    if (commands === undefined) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'client',
        client,
        'an ioredis or iovalkey Redis or Cluster, a node-redis client or cluster, a Valkey GLIDE client, or a RedisScriptRunner',
      )
    }
    if (typeof prefix !== 'string' || /[{}]/.test(prefix))
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'prefix', prefix, 'a string without `{` or `}`')
    if (maxPending !== undefined && (!Number.isSafeInteger(maxPending) || maxPending < 1))
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'maxPending', maxPending, 'a positive whole number')
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1)
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'maxKeys', maxKeys, 'a positive whole number')
    for (const [name, fn] of [
      ['clock', options.clock],
      ['onError', options.onError],
    ] as const) {
      if (fn !== undefined && typeof fn !== 'function')
        throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, fn, 'a function, or undefined')
    }
    this.#client = client
    this.#commands = commands
    this.#runner = options.runner ?? scriptRunnerOn(commands)
    this.#prefix = prefix
    this.#interval = parseDuration(interval, 'interval')
    this.#maxPending = maxPending
    this.#maxStale = parseDuration(maxStale, 'maxStale')
    this.#maxKeys = maxKeys
    this.#onError = options.onError ?? throttledErrorLog()
    this.#clock = options.clock
    onBeforeExit(this.#exitHook)
  }

  /** Number of keys held in this process. */
  get size(): number {
    return this.#size
  }

  consume(request: StoreRequest): Decision | Promise<Decision> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#exactStore().consume(request)
    this.#checkReachable()
    // A key this process has not read from Redis yet (new, or evicted and acknowledged since): its view is
    // empty, so it reads the shared counts before admitting anything, or it could pass the bound once per cold
    // start (docs/algorithms.md).
    if (entry.syncedAt === Number.NEGATIVE_INFINITY) return this.#consumeAfterSync(entry, request)
    const decision = this.#decide(entry, request.cost, true)
    // A key in use is read back once per interval, even when this process only denies it.
    this.#markDirty(entry)
    if (!decision.allowed) return decision
    if (entry.unacked > 0 && entry.unacked + request.cost > entry.maxPending)
      return this.#consumeAfterSync(entry, request)
    this.#record(entry, decision.now, request.cost)
    return decision
  }

  peek(request: StoreRequest): Decision | Promise<Decision> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#exactStore().peek(request)
    this.#checkReachable()
    this.#markDirty(entry)
    return this.#decide(entry, request.cost, false)
  }

  refund(request: RefundRequest): void | Promise<void> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#exactStore().refund(request)
    request.rules.forEach((rule, i) => {
      addCounts(entry.unsent[i]!, Math.floor(request.at / rule.windowMs), -request.cost)
    })
    this.#markDirty(entry)
  }

  async reset(target: StoreTarget): Promise<void> {
    const entry = this.#entryFor(target)
    if (entry === undefined) return this.#exactStore().reset(target)
    this.#remove(entry)
    await this.#commands.del(entry.keys)
  }

  /**
   * Runs one interval's reconciliation now: every key with unsent counts, or used since its previous sync, sends
   * them and reads back the shared counts, in as few scripts as the keys allow (up to 256 keys each; on a
   * Cluster, one script per hash slot). Rejects with the first failure.
   */
  async sync(): Promise<void> {
    const dirty = this.#dirty
    this.#dirty = []
    const ready: Entry[] = []
    const busy: Entry[] = []
    for (const entry of dirty) {
      if (!entry.dirty) continue
      entry.dirty = false
      if (entry.flushing === undefined) ready.push(entry)
      else busy.push(entry)
    }
    const flights = this.#sendAll(ready)
    // A sync in flight may have read before this call: wait for it, then read again.
    if (busy.length > 0) flights.push(this.#resend(busy))
    const results = await Promise.allSettled(flights)
    const failed = results.find((result) => result.status === 'rejected')
    if (failed) throw failed.reason
  }

  async #resend(entries: readonly Entry[]): Promise<void> {
    await Promise.allSettled(entries.map((entry) => entry.flushing))
    // One sent meanwhile (a request past maxPending) read after this sync began: it will do.
    const joined = entries.flatMap((entry) => entry.flushing ?? [])
    const results = await Promise.allSettled([
      ...this.#sendAll(entries.filter((entry) => entry.flushing === undefined)),
      ...joined,
    ])
    const failed = results.find((result) => result.status === 'rejected')
    if (failed) throw failed.reason
  }

  /**
   * Stops the timer and sends every unsent count. The client stays open: it is yours, to close after this store
   * (docs/shutdown.md). Without it, a process that ends by itself sends them on `beforeExit`, but
   * `process.exit()`, a signal without a handler and SIGKILL lose up to `maxPending` units per key. Resolves what
   * could not be sent: `{ unsynced: 0 }` when every count reached Redis; else the cost units admitted here and
   * never sent (e.g. the client was closed first), lost to the shared counts, which `onError` also hears of.
   */
  async close(): Promise<{ unsynced: number }> {
    if (this.#timer) realClearTimeout(this.#timer)
    this.#timer = null
    exitHooks.delete(this.#exitHook)
    let failure: unknown
    let failed = false
    await this.sync().catch((error: unknown) => {
      failed = true
      failure = error
    })
    await (this.#exact as Store | undefined)?.close?.()
    if (!failed) return { unsynced: 0 }
    let unsynced = 0
    const unsent = new Set(this.#dirty)
    // Evicted keys whose counts Redis has not acknowledged yet count too.
    for (const departing of this.#departing.values())
      for (const entry of departing.values()) unsent.add(entry)
    for (const entry of unsent) unsynced += entry.unacked
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
    const hash = sha256Base64url(key).slice(0, 22)
    return `${this.#prefix}${prefix}{${hash}}:${rule.id}:s`
  }

  #tick(): void {
    void this.sync().catch(this.#onError)
  }

  /**
   * The process has nothing left to do and is about to exit without `close()`: sends what has not been sent, and
   * keeps the process alive (at most `maxStale`) until Redis answers. Node emits `beforeExit` only when nothing
   * else keeps the process alive (an open Redis connection does), and never on `process.exit()` or a signal.
   */
  #sendBeforeExit(): void {
    if (this.#exitSync !== undefined || this.#exitFailed) return
    // Evicted keys' counts not yet acknowledged go too (their own send may still wait for one in flight).
    for (const departing of this.#departing.values())
      for (const entry of departing.values()) if (entry.unacked > 0) this.#markDirty(entry)
    if (this.#dirty.length === 0) return
    const alive = setTimeout(() => {}, this.#maxStale)
    this.#exitSync = this.sync()
      .then(
        () => {
          this.#exitFailed = false
        },
        (error: unknown) => {
          this.#exitFailed = true
          this.#onError(error)
        },
      )
      .finally(() => {
        clearTimeout(alive)
        this.#exitSync = undefined
      })
  }

  #now(): number {
    return this.#clock === undefined ? Date.now() + this.#offset : Math.floor(this.#clock())
  }

  /** Throws once Redis has failed for longer than `maxStale`, so that the limiter's failure policy answers. */
  #checkReachable(): void {
    if (this.#failingSince !== undefined && this.#now() - this.#failingSince > this.#maxStale) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        `Redis has not answered a sync for more than \`maxStale\` (${this.#maxStale} ms).`,
        { cause: this.#lastError },
      )
    }
  }

  /** The decision from this process's view: the last synced counts plus what it admitted since. */
  /** `consume`: the outcome is reported as after the request (admitted, written by `#record`); a peek's is not. */
  #decide(entry: Entry, cost: number, consume: boolean): Decision {
    const now = this.#now()
    const { rules } = entry.target
    const { writers, states, views, sent, unsent } = entry
    for (let i = 0; i < rules.length; i++) {
      writers[i]!(states[i], Math.floor(now / rules[i]!.windowMs), views[i]!, sent[i]!, unsent[i]!)
    }
    return decideLocally(rules, states, now, cost, false, undefined, undefined, consume)
  }

  #record(entry: Entry, now: number, cost: number): void {
    const { rules } = entry.target
    for (let i = 0; i < rules.length; i++) {
      addCounts(entry.unsent[i]!, Math.floor(now / rules[i]!.windowMs), cost)
    }
    entry.unacked += cost
    if (entry.unacked >= entry.maxPending && entry.flushing === undefined) {
      entry.dirty = false
      this.#flush(entry).catch(this.#onError)
    } else this.#markDirty(entry)
  }

  #markDirty(entry: Entry): void {
    if (entry.dirty) return
    entry.dirty = true
    this.#dirty.push(entry)
    if (this.#timer === undefined) {
      // Real time (unref'd), like the store's Redis calls: a test's fake timers neither run nor hold it.
      const tick = () => {
        if (this.#timer === null) return
        this.#tick()
        this.#timer = realSetTimeout(tick, this.#interval)
      }
      this.#timer = realSetTimeout(tick, this.#interval)
    }
  }

  /**
   * A request past `maxPending`, or the first for a key not yet read from Redis: waits for the round trip that
   * acknowledges what is pending and reads the shared counts, then decides. Under many concurrent requests for one
   * key each round trip admits up to `maxPending` of them; the limiter's `timeout` bounds the wait.
   */
  async #consumeAfterSync(entry: Entry, request: StoreRequest): Promise<Decision> {
    // Evicted meanwhile, the entry stays the key's (departing) while requests wait on it: it decides them.
    entry.waiting++
    try {
      for (;;) {
        entry.dirty = false
        await this.#flush(entry)
        this.#checkReachable()
        const decision = this.#decide(entry, request.cost, true)
        if (!decision.allowed) return decision
        if (entry.unacked === 0 || entry.unacked + request.cost <= entry.maxPending) {
          this.#record(entry, decision.now, request.cost)
          return decision
        }
      }
    } finally {
      entry.waiting--
      if (!entry.held) this.#maybeDeparted(entry)
    }
  }

  /** Sends the entry's unsent counts and reads back the shared ones, unless a sync of it is in flight already. */
  #flush(entry: Entry): Promise<void> {
    return entry.flushing ?? this.#send([entry])
  }

  /**
   * Sends `entries` (none in flight) in scripts of at most BATCH_KEYS keys; on a Cluster, each script holds the
   * keys of one hash slot only. Returns one promise per script.
   */
  #sendAll(entries: readonly Entry[]): Promise<void>[] {
    if (entries.length === 0) return []
    const groups = this.#commands.cluster ? bySlot(entries) : [entries]
    const flights: Promise<void>[] = []
    for (const group of groups) {
      let batch: Entry[] = []
      let keys = 0
      for (const entry of group) {
        if (keys > 0 && keys + entry.keys.length > BATCH_KEYS) {
          flights.push(this.#send(batch))
          batch = []
          keys = 0
        }
        batch.push(entry)
        keys += entry.keys.length
      }
      flights.push(this.#send(batch))
    }
    return flights
  }

  /**
   * One script, one round trip: adds the unsent counts of `entries` to the shared ones and reads these back. The
   * entries' keys must share one Cluster slot on a Cluster client.
   */
  #send(entries: readonly Entry[]): Promise<void> {
    const keys: string[] = []
    const args: string[] = [this.#clock === undefined ? '-1' : String(Math.floor(this.#clock()))]
    for (const entry of entries) {
      const { rules } = entry.target
      const sent = entry.unsent
      entry.unsent = entry.sent
      entry.sent = sent
      entry.sentCost = entry.unacked
      for (let i = 0; i < rules.length; i++) {
        const { win, curr, prev } = sent[i]!
        keys.push(entry.keys[i]!)
        args.push(`${rules[i]!.windowMs}:${Number.isFinite(win) ? win : 0}:${curr}:${prev}`)
      }
    }
    const started = Date.now()
    const flight = this.#runner
      .run(SYNC_SCRIPT, keys, args)
      .then((reply) => syncReplies(reply, keys.length))
      .then(
        (replies) => {
          if (this.#clock === undefined) this.#offset = Number(replies[0]) - (started + Date.now()) / 2
          const now = this.#now()
          let at = 1
          for (const entry of entries) {
            entry.flushing = undefined
            at = this.#apply(entry, replies, at, now)
          }
          this.#failingSince = undefined
        },
        (error: unknown) => {
          for (const entry of entries) {
            entry.flushing = undefined
            this.#restore(entry)
          }
          this.#failingSince ??= this.#now()
          this.#lastError = error
          throw error
        },
      )
    for (const entry of entries) entry.flushing = flight
    return flight
  }

  /** Takes the entry's part of a sync reply, from index `at`; returns the index after it. */
  #apply(entry: Entry, replies: readonly unknown[], at: number, now: number): number {
    const { views, sent } = entry
    for (let i = 0; i < views.length; i++) {
      const view = views[i]!
      view.win = Number(replies[at++])
      view.curr = Number(replies[at++])
      view.prev = Number(replies[at++])
      clearCounts(sent[i]!)
    }
    entry.unacked -= entry.sentCost
    entry.sentCost = 0
    entry.syncedAt = now
    if (!entry.held) this.#maybeDeparted(entry)
    return at
  }

  /**
   * After a failed sync: its counts go back with the unsent ones, to be sent again with the next sync (a reply
   * lost after the script ran counts them twice: the error errs towards denying).
   */
  #restore(entry: Entry): void {
    const { unsent, sent } = entry
    for (let i = 0; i < sent.length; i++) {
      mergeCounts(unsent[i]!, sent[i]!)
      clearCounts(sent[i]!)
    }
    entry.sentCost = 0
    this.#markDirty(entry)
  }

  /** The entry for a target whose rules can be synchronised; undefined when they cannot. */
  #entryFor(target: StoreTarget): Entry | undefined {
    const table = this.#table(target)
    if (table === undefined) return undefined
    let entry = table.get(target.key)
    if (entry === undefined) {
      const oldest = this.#recency.leastRecent
      if (this.#size >= this.#maxKeys && oldest !== undefined) this.#evict(oldest)
      entry =
        (this.#departing.size > 0 ? this.#return(table, target.key) : undefined) ??
        this.#create(table, target)
      entry.held = true
      table.set(target.key, entry)
      this.#size++
    }
    this.#recency.touch(entry)
    return entry
  }

  /** The table of the target's rule set and limiter prefix; undefined when its rules cannot be synchronised. */
  #table(target: StoreTarget): Map<string, Entry> | undefined {
    let byPrefix = this.#tables.get(target.rules)
    if (byPrefix === undefined) {
      byPrefix = this.#byPrefixFor(target.rules)
      this.#tables.set(target.rules, byPrefix)
    }
    if (byPrefix === null) return undefined
    let table = byPrefix.get(target.prefix)
    if (table === undefined) {
      table = new Map()
      byPrefix.set(target.prefix, table)
    }
    return table
  }

  /** Rule arrays with the same ids share state, so they share tables; null when a rule cannot be synchronised. */
  #byPrefixFor(rules: readonly Rule[]): Map<string, Map<string, Entry>> | null {
    if (rules.every((rule) => COUNTER_STATES[rule.algorithm] !== undefined)) {
      const signature = rules.map((rule) => rule.id).join(',')
      let byPrefix = this.#bySignature.get(signature)
      if (byPrefix === undefined) {
        byPrefix = new Map()
        this.#bySignature.set(signature, byPrefix)
      }
      return byPrefix
    }
    emitWarning(
      `SyncedStore synchronises sliding window counter and fixed window rules only; rules ${rules.map((rule) => rule.id).join(', ')} are decided by an exact RedisStore, one round trip per request.`,
      'RATEWINDOW_SYNC_UNSUPPORTED',
    )
    return null
  }

  #create(table: Map<string, Entry>, target: StoreTarget): Entry {
    const { rules } = target
    const smallest = Math.min(...rules.map((rule) => rule.limit))
    const keys = rules.map((rule) => this.keyFor(target.prefix, target.key, rule))
    return {
      table,
      target: { prefix: target.prefix, key: target.key, rules },
      keys,
      slot: this.#commands.cluster ? clusterSlot(keys[0]!) : 0,
      writers: rules.map((rule) => COUNTER_STATES[rule.algorithm]!),
      views: rules.map(emptyCounts),
      sent: rules.map(emptyCounts),
      unsent: rules.map(emptyCounts),
      unacked: 0,
      sentCost: 0,
      syncedAt: Number.NEGATIVE_INFINITY,
      maxPending: this.#maxPending ?? Math.max(1, Math.floor(smallest / 100)),
      states: rules.map((rule) => rule.logic.create()),
      flushing: undefined,
      waiting: 0,
      dirty: false,
      held: true,
      older: undefined,
      newer: undefined,
    }
  }

  #exactStore(): RedisStore {
    this.#exact ??= new RedisStore({
      client: this.#client,
      prefix: this.#prefix,
      clock: this.#clock,
    })
    return this.#exact
  }

  /**
   * Drops the least recently used key; what it admitted still goes to Redis. Until Redis has acknowledged it, and
   * while requests wait on it, the entry stays among the departing, to be taken back if its key is used again:
   * one entry per key at any time, so that no fresh view ignores what an older one admitted.
   */
  #evict(entry: Entry): void {
    this.#remove(entry)
    if (entry.unacked === 0 && entry.waiting === 0) return
    let departing = this.#departing.get(entry.table)
    if (departing === undefined) {
      departing = new Map()
      this.#departing.set(entry.table, departing)
    }
    departing.set(entry.target.key, entry)
    if (entry.unacked === 0) return
    const inFlight = entry.flushing ?? Promise.resolve()
    inFlight
      .catch(() => {})
      .then(() => this.#flush(entry))
      .catch(this.#onError)
  }

  /** A departing entry of `key`, taken back into use. */
  #return(table: Map<string, Entry>, key: string): Entry | undefined {
    const departing = this.#departing.get(table)
    const entry = departing?.get(key)
    if (entry !== undefined) this.#departed(entry)
    return entry
  }

  /** An evicted entry stops departing once Redis acknowledged all it admitted and no request waits on it. */
  #maybeDeparted(entry: Entry): void {
    if (entry.unacked === 0 && entry.waiting === 0) this.#departed(entry)
  }

  /** No longer departing: acknowledged by Redis, or taken back. */
  #departed(entry: Entry): void {
    const departing = this.#departing.get(entry.table)
    if (departing?.get(entry.target.key) !== entry) return
    departing.delete(entry.target.key)
    if (departing.size === 0) this.#departing.delete(entry.table)
  }

  #remove(entry: Entry): void {
    if (!entry.held) return
    entry.held = false
    entry.table.delete(entry.target.key)
    this.#size--
    entry.dirty = false
    this.#recency.remove(entry)
  }
}

/** The `beforeExit` hooks of the open stores: one process listener for all of them, installed once. */
const exitHooks = new Set<() => void>()
let listeningBeforeExit = false

function onBeforeExit(hook: () => void): void {
  exitHooks.add(hook)
  // Node, Bun and Deno have a process to hook; Workers do not (nothing outlives a request there).
  const host = (globalThis as { process?: { on?: (event: 'beforeExit', listener: () => void) => unknown } })
    .process
  if (listeningBeforeExit || typeof host?.on !== 'function') return
  listeningBeforeExit = true
  host.on('beforeExit', () => {
    for (const each of exitHooks) each()
  })
}

/** The entries grouped by Cluster slot. */
function bySlot(entries: readonly Entry[]): Iterable<Entry[]> {
  const groups = new Map<number, Entry[]>()
  for (const entry of entries) {
    const group = groups.get(entry.slot)
    if (group === undefined) groups.set(entry.slot, [entry])
    else group.push(entry)
  }
  return groups.values()
}

/** The sync script's reply, checked: the server time, then three integers per key. */
function syncReplies(reply: unknown, keys: number): readonly unknown[] {
  if (!Array.isArray(reply) || reply.length !== 1 + 3 * keys) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_STORE',
      `Unexpected reply from the sync script: ${String(reply)}`,
    )
  }
  return reply
}
