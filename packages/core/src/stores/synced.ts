import { createHash } from 'node:crypto'
import type { Rule } from '../algorithms/types.js'
import { type Duration, parseDuration } from '../duration.js'
import { invalid, RateLimitError, requireObject } from '../errors.js'
import { throttledErrorLog } from '../failure.js'
import { addCounts, COUNTER_STATES, emptyCounts, mergeCounts, type WindowCounts } from '../sync/counters.js'
import { type Linked, RecencyList } from '../sync/recency.js'
import { type ScriptRunner, SYNC_SCRIPT, scriptRunnerOn } from '../sync/script.js'
import { type RedisClient, type RedisScriptRunner, scriptRunnerFor } from './clients/index.js'
import { decideLocally } from './decide.js'
import { RedisStore } from './redis.js'
import type { Decision, RefundRequest, Store, StoreRequest, StoreTarget } from './types.js'

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
  /** How often each process sends its counts to Redis and reads everyone's back, per key in use. @default '100ms' */
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

interface Entry extends Linked<Entry> {
  readonly id: string
  readonly target: StoreTarget
  readonly keys: string[]
  /** Global counts per rule at the last sync, this process's acknowledged counts included. */
  views: WindowCounts[]
  /** Counts sent and not yet acknowledged, and counts not yet sent. */
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
}

/**
 * Synchronised local mode: each process decides from its own view of the shared counts, and reconciles with
 * Redis in one round trip per key every `interval`, or as soon as it holds `maxPending` unacknowledged units.
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
  readonly #entries = new Map<string, Entry>()
  readonly #dirty = new Set<Entry>()
  readonly #signatures = new WeakMap<readonly Rule[], string | null>()
  readonly #timer: NodeJS.Timeout
  readonly #recency = new RecencyList<Entry>()
  /** Server time minus local time, learned from each sync (without `clock`). */
  #offset = 0
  #failingSince: number | undefined
  #lastError: unknown
  #exact: RedisStore | undefined

  constructor(options: SyncedStoreOptions) {
    requireObject(options, 'options', "{ client: new Redis(), interval: '100ms' }")
    const {
      client,
      prefix = '',
      interval = '100ms',
      maxPending,
      maxStale = '2s',
      maxKeys = 100_000,
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
    this.#timer = setInterval(() => this.#tick(), this.#interval)
    this.#timer.unref()
  }

  /** Number of keys held in this process. */
  get size(): number {
    return this.#entries.size
  }

  consume(request: StoreRequest): Decision | Promise<Decision> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#exactStore().consume(request)
    this.#checkReachable()
    const decision = this.#decide(entry, request.cost)
    // A key in use is read back once per interval, even when this process only denies it.
    this.#dirty.add(entry)
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
    this.#dirty.add(entry)
    return this.#decide(entry, request.cost)
  }

  refund(request: RefundRequest): void | Promise<void> {
    const entry = this.#entryFor(request)
    if (entry === undefined) return this.#exactStore().refund(request)
    request.rules.forEach((rule, i) => {
      addCounts(entry.unsent[i]!, Math.floor(request.at / rule.windowMs), -request.cost)
    })
    this.#dirty.add(entry)
  }

  async reset(target: StoreTarget): Promise<void> {
    const entry = this.#entryFor(target)
    if (entry === undefined) return this.#exactStore().reset(target)
    this.#remove(entry)
    await this.#commands.del(entry.keys)
  }

  /**
   * Runs one interval's reconciliation now: every key with unsent counts, or used since its previous sync, sends
   * them and reads back the shared counts. Rejects with the first failure.
   */
  async sync(): Promise<void> {
    const entries = [...this.#dirty]
    this.#dirty.clear()
    // A sync in flight may have read before this call: wait for it, then read again.
    const fresh = async (entry: Entry) => {
      await entry.flushing?.catch(() => {})
      return this.#flush(entry)
    }
    const results = await Promise.allSettled(entries.map(fresh))
    const failed = results.find((result) => result.status === 'rejected')
    if (failed) throw failed.reason
  }

  /** Stops the timer and sends every unsent count. The client stays open: it is yours. */
  async close(): Promise<void> {
    clearInterval(this.#timer)
    await this.sync().catch(this.#onError)
    await (this.#exact as Store | undefined)?.close?.()
  }

  /** The Redis key holding `rule`'s shared counts for `key` under a limiter `prefix`. */
  keyFor(prefix: string, key: string, rule: Rule): string {
    const hash = createHash('sha256').update(key).digest('base64url').slice(0, 22)
    return `${this.#prefix}${prefix}{${hash}}:${rule.id}:s`
  }

  #tick(): void {
    void this.sync().catch(this.#onError)
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
  #decide(entry: Entry, cost: number): Decision {
    const now = this.#now()
    const { rules } = entry.target
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      COUNTER_STATES[rule.algorithm]!(entry.states[i], Math.floor(now / rule.windowMs), [
        entry.views[i]!,
        entry.sent[i]!,
        entry.unsent[i]!,
      ])
    }
    return decideLocally(rules, entry.states, now, cost, false)
  }

  #record(entry: Entry, now: number, cost: number): void {
    entry.target.rules.forEach((rule, i) => {
      addCounts(entry.unsent[i]!, Math.floor(now / rule.windowMs), cost)
    })
    entry.unacked += cost
    this.#dirty.add(entry)
    if (entry.unacked >= entry.maxPending && entry.flushing === undefined) {
      this.#dirty.delete(entry)
      this.#flush(entry).catch(this.#onError)
    }
  }

  /**
   * A request past `maxPending`: waits for the round trip that acknowledges what is pending, then decides. Under
   * many concurrent requests for one key each round trip admits up to `maxPending` of them; the limiter's
   * `timeout` bounds the wait.
   */
  async #consumeAfterSync(entry: Entry, request: StoreRequest): Promise<Decision> {
    for (;;) {
      this.#dirty.delete(entry)
      await this.#flush(entry)
      this.#checkReachable()
      const decision = this.#decide(entry, request.cost)
      if (!decision.allowed) return decision
      if (entry.unacked === 0 || entry.unacked + request.cost <= entry.maxPending) {
        this.#record(entry, decision.now, request.cost)
        return decision
      }
    }
  }

  /** Sends the entry's unsent counts and reads back the shared ones: one script, one round trip. */
  #flush(entry: Entry): Promise<void> {
    if (entry.flushing !== undefined) return entry.flushing
    const { rules } = entry.target
    entry.sent = entry.unsent
    entry.unsent = rules.map(emptyCounts)
    entry.sentCost = entry.unacked
    const args: number[] = [this.#clock === undefined ? -1 : Math.floor(this.#clock())]
    rules.forEach((rule, i) => {
      const { win, curr, prev } = entry.sent[i]!
      args.push(rule.windowMs, Number.isFinite(win) ? win : 0, curr, prev)
    })
    const started = Date.now()
    entry.flushing = this.#runner.run(SYNC_SCRIPT, entry.keys, args).then(
      (reply) => {
        entry.flushing = undefined
        this.#apply(entry, reply, started)
      },
      (error: unknown) => {
        entry.flushing = undefined
        // Sent again with the next sync: a reply lost after the script ran counts twice (errs towards denying).
        rules.forEach((_, i) => {
          mergeCounts(entry.unsent[i]!, entry.sent[i]!)
        })
        entry.sent = rules.map(emptyCounts)
        entry.sentCost = 0
        this.#dirty.add(entry)
        this.#failingSince ??= this.#now()
        this.#lastError = error
        throw error
      },
    )
    return entry.flushing
  }

  #apply(entry: Entry, reply: unknown, started: number): void {
    const { rules } = entry.target
    if (!Array.isArray(reply) || reply.length !== 1 + 3 * rules.length) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        `Unexpected reply from the sync script: ${String(reply)}`,
      )
    }
    if (this.#clock === undefined) this.#offset = Number(reply[0]) - (started + Date.now()) / 2
    for (let i = 0; i < rules.length; i++) {
      entry.views[i] = {
        win: Number(reply[1 + 3 * i]),
        curr: Number(reply[2 + 3 * i]),
        prev: Number(reply[3 + 3 * i]),
      }
    }
    entry.sent = rules.map(emptyCounts)
    entry.unacked -= entry.sentCost
    entry.sentCost = 0
    entry.syncedAt = this.#now()
    this.#failingSince = undefined
  }

  /** The entry for a target whose rules can be synchronised; undefined when they cannot. */
  #entryFor(target: StoreTarget): Entry | undefined {
    const signature = this.#signature(target.rules)
    if (signature === null) return undefined
    const id = `${target.prefix}\u0000${signature}\u0000${target.key}`
    let entry = this.#entries.get(id)
    if (entry === undefined) {
      const oldest = this.#recency.leastRecent
      if (this.#entries.size >= this.#maxKeys && oldest !== undefined) this.#evict(oldest)
      entry = this.#create(id, target)
      this.#entries.set(id, entry)
    }
    this.#recency.touch(entry)
    return entry
  }

  #create(id: string, target: StoreTarget): Entry {
    const { rules } = target
    const smallest = Math.min(...rules.map((rule) => rule.limit))
    return {
      id,
      target: { prefix: target.prefix, key: target.key, rules },
      keys: rules.map((rule) => this.keyFor(target.prefix, target.key, rule)),
      views: rules.map(emptyCounts),
      sent: rules.map(emptyCounts),
      unsent: rules.map(emptyCounts),
      unacked: 0,
      sentCost: 0,
      syncedAt: Number.NEGATIVE_INFINITY,
      maxPending: this.#maxPending ?? Math.max(1, Math.floor(smallest / 100)),
      states: rules.map((rule) => rule.logic.create()),
      flushing: undefined,
      older: undefined,
      newer: undefined,
    }
  }

  /** Rule ids joined, or null when a rule's algorithm cannot be synchronised by counts. */
  #signature(rules: readonly Rule[]): string | null {
    let signature = this.#signatures.get(rules)
    if (signature === undefined) {
      signature = rules.every((rule) => COUNTER_STATES[rule.algorithm] !== undefined)
        ? rules.map((rule) => rule.id).join(',')
        : null
      if (signature === null) {
        process.emitWarning(
          `SyncedStore synchronises sliding window counter and fixed window rules only; rules ${rules.map((rule) => rule.id).join(', ')} are decided by an exact RedisStore, one round trip per request.`,
          { code: 'RATEWINDOW_SYNC_UNSUPPORTED' },
        )
      }
      this.#signatures.set(rules, signature)
    }
    return signature
  }

  #exactStore(): RedisStore {
    this.#exact ??= new RedisStore({
      client: this.#client,
      prefix: this.#prefix,
      clock: this.#clock,
    })
    return this.#exact
  }

  /** Drops the least recently used key; what it admitted still goes to Redis. */
  #evict(entry: Entry): void {
    this.#remove(entry)
    if (entry.unacked === 0) return
    const inFlight = entry.flushing ?? Promise.resolve()
    inFlight
      .catch(() => {})
      .then(() => this.#flush(entry))
      .catch(this.#onError)
  }

  #remove(entry: Entry): void {
    if (this.#entries.get(entry.id) !== entry) return
    this.#entries.delete(entry.id)
    this.#dirty.delete(entry)
    this.#recency.remove(entry)
  }
}
