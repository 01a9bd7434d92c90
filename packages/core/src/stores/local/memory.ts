import type { OverrideChange, OverrideRecord } from '../../algorithms/override.js'
import type { Rule } from '../../algorithms/types.js'
import { parseTimerDuration } from '../../support/duration.js'
import { describeValue, invalid, RateLimitError } from '../../support/errors.js'
import { rejectUnknownOptions } from '../../support/option-names.js'
import { emitWarning, onCloudflareWorkers } from '../../support/runtime.js'
import { defaultEpochNow, isEpochTime } from '../../time/default-clock.js'
import { realClearTimeout, realSetImmediate, realSetTimeout } from '../../time/real-timers.js'
import type {
  ConcurrencyStore,
  Decision,
  LeaseDecision,
  LeaseRequest,
  OverridePage,
  RefundRequest,
  Store,
  StoredKeyPage,
  StoreRequest,
  StoreTarget,
} from '../types.js'
import { storedClientId } from './client-id.js'
import {
  acquireLeaseIn,
  chargeKey,
  consumeKey,
  dropExpiredLeases,
  freshStates,
  giveKey,
  type KeyStateData,
  keepKey,
  liveAt,
  peekKey,
  refundKey,
  tuneKey,
  underOverride,
} from './key-state.js'
import { MEMORY_STORE_DEFAULTS, MEMORY_STORE_OPTIONS, type MemoryStoreOptions } from './memory-options.js'
import { OverrideTable } from './override-table.js'
import { type Linked, RecencyList } from './recency.js'
import { storedKeys, storedPage } from './stored-scan.js'

/** A client's state (the per-key steps of key-state.ts run on it), where it is held, and its place in recency. */
interface Entry extends KeyStateData, Linked<Entry> {
  /** The table holding the entry (one per limiter namespace), and its key there. */
  table: Map<string, Entry>
  id: string
}

const SWEEP_SLICE = 5_000

/**
 * The embedded default store: state in this process's memory, sized to each algorithm (two integers for the
 * counters, a typed-array ring buffer for the log). Expired keys are dropped lazily and by an unref'd sweep;
 * no timer per key.
 *
 * Single process only: every process (cluster worker, pod) counts on its own. Use `RedisStore` to share
 * limits between processes.
 */
export class MemoryStore implements Store, ConcurrencyStore {
  readonly penalties = true
  readonly reservations = true
  readonly overrides = true
  /** Overrides and manual blocks, per limiter scope and client key. */
  readonly #overrides = new OverrideTable()
  /** In-flight leases (ConcurrencyLimiter): per namespace and key, lease id → expiry (ms, the store's clock). */
  readonly #leases = new Map<string, Map<string, number>>()
  /**
   * One table per namespace (rule set and limiter prefix), keyed by the identifier itself: no per-request key
   * concatenation, and no long composite strings held per key.
   */
  readonly #tables = new WeakMap<readonly Rule[], Map<string, Map<string, Entry>>>()
  readonly #allTables = new Set<Map<string, Entry>>()
  readonly #bySignature = new Map<string, Map<string, Map<string, Entry>>>()
  #size = 0
  /**
   * NOTE: recency is a doubly linked list through the entries, not Map re-insertion: deleting from the front
   * of a Map leaves holes that every `keys().next()` walks over, which made eviction quadratic under floods.
   */
  readonly #recency = new RecencyList<Entry>()
  readonly #clock: () => number
  readonly #maxKeys: number
  readonly #sweepMs: number
  /**
   * The background sweep, started by the store's first use (Workers forbid timers in global scope, where a store
   * is usually made); null once closed.
   */
  #timer: ReturnType<typeof realSetTimeout> | undefined | null
  #sweeping = false

  constructor(options: MemoryStoreOptions = {}) {
    rejectUnknownOptions(options, MEMORY_STORE_OPTIONS, 'MemoryStore')
    const {
      clock = defaultEpochNow,
      maxKeys = MEMORY_STORE_DEFAULTS.maxKeys,
      sweepInterval = MEMORY_STORE_DEFAULTS.sweepInterval,
    } = options
    if (typeof clock !== 'function')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'clock', clock, 'a function returning epoch ms')
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'maxKeys',
        maxKeys,
        'a positive whole number such as 100000',
      )
    }
    this.#clock = clock
    this.#maxKeys = maxKeys
    this.#sweepMs = parseTimerDuration(sweepInterval, 'sweepInterval')
  }

  /** Sweeps every `sweepInterval` on real time (unref'd): a test's fake timers never run it nor are held up by it. */
  #startSweeping(): void {
    const tick = () => {
      if (this.#timer === null) return
      this.#sweepInSlices()
      this.#sweepLeases()
      this.#timer = realSetTimeout(tick, this.#sweepMs)
    }
    this.#timer = realSetTimeout(tick, this.#sweepMs)
  }

  /** Number of client keys held now (expired ones count until swept or touched). */
  get size(): number {
    return this.#size
  }

  consume(request: StoreRequest): Decision {
    const now = this.#now()
    const entry = this.#take(this.#table(request), this.#key(request), request.rules, now)
    const record = this.#record(request, now)
    const rules =
      record === undefined && entry.tuned === undefined
        ? request.rules
        : tuneKey(request.rules, entry, record, now)
    const decision = consumeKey(
      rules,
      entry,
      now,
      request.cost,
      request.penalty,
      request.reserve,
      record?.block,
    )
    this.#keep(entry, rules, request.penalty, now)
    return rules === request.rules && record === undefined
      ? decision
      : underOverride(decision, request.rules, rules, record)
  }

  peek(request: StoreRequest): Decision {
    const now = this.#now()
    const entry = liveAt(this.#table(request).get(this.#key(request)), now)
    return peekKey(request.rules, entry, now, request.cost, request.penalty, this.#record(request, now))
  }

  /** `Store.peekStored`: a peek at the client held as `id` (`StoredKey.hash`); a raw key's record is read too. */
  peekStored(request: StoreRequest, id: string): Decision {
    if (!id.startsWith('#')) return this.peek({ ...request, key: id })
    const now = this.#now()
    const entry = liveAt(this.#table(request).get(id), now)
    return peekKey(request.rules, entry, now, request.cost, request.penalty)
  }

  /** `Store.scanStored`: a page of the keys held, each client's counters per namespace, then the override records. */
  scanStored(page: { cursor?: string | undefined; count: number }): StoredKeyPage {
    const now = this.#now()
    return storedPage(storedKeys(this.#bySignature, this.#overrides.stored(now), now), page)
  }

  refund(request: RefundRequest): void {
    this.#change(request, false, (rules, entry, now) =>
      refundKey(rules, entry, now, request.cost, request.at),
    )
  }

  charge(request: StoreRequest): { charged: number } {
    let charged = 0
    this.#change(request, true, (rules, entry, now) => {
      charged = chargeKey(rules, entry, now, request.cost)
    })
    return { charged }
  }

  give(request: StoreRequest): void {
    this.#change(request, false, (rules, entry, now) => giveKey(rules, entry, now, request.cost))
  }

  updateOverride(scope: string, key: string, change: OverrideChange): OverrideRecord | undefined {
    return this.#overrides.update(scope, key, change, this.#now())
  }

  readOverride(scope: string, key: string): OverrideRecord | undefined {
    return this.#overrides.read(scope, key, this.#now())
  }

  listOverrides(scope: string, page: { cursor?: string | undefined; count: number }): OverridePage {
    return this.#overrides.list(scope, page.cursor, page.count, this.#now())
  }

  /** The key's override record, when the request reads one. */
  #record(request: StoreRequest, now: number): OverrideRecord | undefined {
    return request.overrides === undefined
      ? undefined
      : this.#overrides.read(request.overrides, request.key, now)
  }

  /**
   * A step that changes a key's state (refund, charge, give) under the limits in force; `create`: on a fresh state
   * when the key has none (a charge), else nothing to change.
   */
  #change(
    request: StoreRequest,
    create: boolean,
    step: (rules: readonly Rule[], entry: Entry, now: number) => void,
  ): void {
    const now = this.#now()
    const table = this.#table(request)
    const entry = create
      ? this.#take(table, this.#key(request), request.rules, now)
      : liveAt(table.get(this.#key(request)), now)
    if (entry === undefined) return
    const rules = tuneKey(request.rules, entry, this.#record(request, now), now)
    step(rules, entry, now)
    this.#keep(entry, rules, request.penalty, now)
  }

  acquire(request: LeaseRequest): LeaseDecision {
    const now = this.#now()
    const id = `${request.prefix}\u0000${this.#key(request)}`
    let leases = this.#leases.get(id)
    if (leases === undefined) {
      leases = new Map()
      this.#leases.set(id, leases)
    }
    const decision = acquireLeaseIn(leases, request, now)
    if (leases.size === 0) this.#leases.delete(id)
    return decision
  }

  /** Drops expired leases of keys nobody asked about since (a key's own acquire drops its expired ones). */
  #sweepLeases(): void {
    const now = this.#clock()
    if (!isEpochTime(now)) return
    this.#overrides.sweep(now)
    for (const [id, leases] of this.#leases) {
      dropExpiredLeases(leases, now)
      if (leases.size === 0) this.#leases.delete(id)
    }
  }

  release(request: Omit<LeaseRequest, 'limit'>): void {
    const id = `${request.prefix}\u0000${this.#key(request)}`
    const leases = this.#leases.get(id)
    if (leases === undefined) return
    leases.delete(request.id)
    if (leases.size === 0) this.#leases.delete(id)
  }

  reset(target: StoreTarget): void {
    const entry = this.#table(target).get(this.#key(target))
    if (entry !== undefined) this.#remove(entry)
  }

  /** Drops every expired key now, in one pass. The background sweep does the same in slices. */
  sweep(): void {
    const now = this.#now()
    this.#overrides.sweep(now)
    for (const table of this.#allTables)
      for (const entry of table.values()) if (entry.expiresAt <= now) this.#remove(entry)
  }

  /**
   * Forgets every count, block, override and lease, for every limiter on this store: e.g. in a test's `beforeEach`, so that
   * each test starts with fresh counters on a store shared by the whole file. The store stays usable.
   */
  clear(): void {
    this.#leases.clear()
    this.#overrides.clear()
    for (const table of this.#allTables) table.clear()
    this.#size = 0
    this.#recency.clear()
  }

  /** Stops the background sweep and forgets everything (`clear`). Decisions after `close` still work. */
  close(): void {
    if (this.#timer) realClearTimeout(this.#timer)
    this.#timer = null
    this.clear()
  }

  /**
   * The clock's reading, checked: NaN, an infinity or a negative time would compare false with every expiry
   * and window, so that nothing is ever counted ("no limit"). Such a reading fails the decision instead, which
   * the limiter reports to `onError` and answers by its failure policy.
   */
  #now(): number {
    if (this.#timer === undefined) {
      this.#startSweeping()
      if (madeByDefault.has(this)) warnPerIsolate()
    }
    const now = this.#clock()
    if (!isEpochTime(now)) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        `MemoryStore \`clock\` returned ${describeValue(now)}: expected epoch milliseconds, a finite number >= 0.`,
        { option: 'clock' },
      )
    }
    return now
  }

  /** The table of the target's namespace: its rule set (by storage ids) and limiter prefix. */
  #table(target: StoreTarget): Map<string, Entry> {
    let byPrefix = this.#tables.get(target.rules)
    if (byPrefix === undefined) {
      // Rule arrays with the same ids share state, so they must share tables.
      const signature = target.rules.map((rule) => rule.id).join(',')
      byPrefix = this.#bySignature.get(signature) ?? new Map()
      this.#bySignature.set(signature, byPrefix)
      this.#tables.set(target.rules, byPrefix)
    }
    let table = byPrefix.get(target.prefix)
    if (table === undefined) {
      table = new Map()
      byPrefix.set(target.prefix, table)
      this.#allTables.add(table)
    }
    return table
  }

  #key(target: { key: string }): string {
    return storedClientId(target.key)
  }

  /** The entry for `id`, with fresh states if it was missing or expired; a new one may evict the oldest. */
  #take(table: Map<string, Entry>, id: string, rules: readonly Rule[], now: number): Entry {
    let entry = table.get(id)
    if (entry === undefined) {
      const oldest = this.#recency.leastRecent
      if (this.#size >= this.#maxKeys && oldest !== undefined) this.#remove(oldest)
      entry = {
        table,
        id,
        states: freshStates(rules),
        penalty: undefined,
        expiresAt: 0,
        older: undefined,
        newer: undefined,
      }
      table.set(id, entry)
      this.#size++
      this.#recency.touch(entry)
    } else if (liveAt(entry, now) === undefined) {
      entry.states = freshStates(rules)
      entry.penalty = undefined
      entry.tuned = undefined
    }
    return entry
  }

  /** Records the entry's expiry and marks it most recently used; drops it if it holds nothing. */
  #keep(entry: Entry, rules: readonly Rule[], penalty: StoreRequest['penalty'], now: number): void {
    if (keepKey(rules, penalty, entry, now)) this.#recency.touch(entry)
    else this.#remove(entry)
  }

  #remove(entry: Entry): void {
    if (entry.table.get(entry.id) !== entry) return
    entry.table.delete(entry.id)
    this.#size--
    this.#recency.remove(entry)
  }

  /** Sweeps in slices of SWEEP_SLICE keys, yielding to the event loop between slices. */
  #sweepInSlices(): void {
    if (this.#sweeping) return
    this.#sweeping = true
    const tables = [...this.#allTables].values()
    let entries: Iterator<Entry> | undefined
    const slice = () => {
      const now = this.#clock()
      // A clock gone wrong is reported by the next decision; the background sweep just stops.
      if (!isEpochTime(now)) {
        this.#sweeping = false
        return
      }
      for (let i = 0; i < SWEEP_SLICE; i++) {
        const next = entries?.next()
        if (next === undefined || next.done) {
          const table = tables.next()
          if (table.done) {
            this.#sweeping = false
            return
          }
          entries = table.value.values()
          continue
        }
        if (next.value.expiresAt <= now) this.#remove(next.value)
      }
      realSetImmediate(slice)
    }
    slice()
  }
}

/** The stores a limiter made because it was given none (`defaultMemoryStore`). */
const madeByDefault = new WeakSet<MemoryStore>()
let warnedPerIsolate = false

/**
 * @internal The MemoryStore a limiter makes when it is given no `store`. On Cloudflare Workers its first use
 * warns, once per isolate, that it counts per isolate (not at module load: nothing runs there).
 */
export function defaultMemoryStore(): MemoryStore {
  const store = new MemoryStore()
  madeByDefault.add(store)
  return store
}

function warnPerIsolate(): void {
  if (warnedPerIsolate || !onCloudflareWorkers()) return
  warnedPerIsolate = true
  emitWarning(
    'No `store` was given, so the default MemoryStore counts in this Workers isolate only: Cloudflare runs ' +
      'many isolates (per location, and more under load), each with its own counters, so a client gets the ' +
      'limit once per isolate. For one exact limit, use the Durable Object store of @ratewindow/cloudflare ' +
      '(`store: new DurableObjectStore({ namespace: env.RATE_LIMITER })`); to count per isolate on purpose, ' +
      'pass `store: new MemoryStore()`.',
    'RATEWINDOW_PER_ISOLATE_STORE',
  )
}
