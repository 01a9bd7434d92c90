import type { OverrideChange, OverrideRecord } from '../../algorithms/override.js'
import type { Rule } from '../../algorithms/types.js'
import { parseTimerDuration } from '../../support/duration.js'
import { describeValue, RateLimitError } from '../../support/errors.js'
import { rejectUnknownOptions } from '../../support/option-names.js'
import { emitWarning, onCloudflareWorkers } from '../../support/runtime.js'
import { fnOption, wholeNumber } from '../../support/validators.js'
import { defaultEpochNow, isEpochTime } from '../../time/default-clock.js'
import { realClearTimeout, realSetTimeout } from '../../time/real-timers.js'
import type {
  Charged,
  ConcurrencyStore,
  Decision,
  DecisionRecord,
  LeaseDecision,
  LeaseRequest,
  OverridePage,
  RefundRequest,
  Store,
  StoredKey,
  StoredKeyPage,
  StoreRequest,
  StoreTarget,
} from '../types.js'
import { storedClientId } from './client-id.js'
import { mirroredByDecideInto } from './decide.js'
import { type Entry, EntryTables } from './entry-tables.js'
import {
  acquireLeaseIn,
  chargeKey,
  consumeKey,
  consumeKeyInto,
  dropExpiredLeases,
  giveKey,
  liveAt,
  peekKey,
  planOf,
  refundKey,
  tuneKey,
  underOverride,
} from './key-state.js'
import { MEMORY_STORE_DEFAULTS, MEMORY_STORE_OPTIONS, type MemoryStoreOptions } from './memory-options.js'
import { OverrideTable } from './override-table.js'
import { OpenScans, storedKeys } from './stored-scan.js'

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
  readonly plans = true
  readonly quotas = true
  /** The most client keys held: past it, the least recently used goes. */
  readonly maxKeys: number
  /** @internal Whether `maxKeys` was given (a store sized on purpose), rather than left at its default. */
  readonly maxKeysGiven: boolean
  /** Overrides and manual blocks, per limiter scope and client key. */
  readonly #overrides = new OverrideTable()
  /** In-flight leases (ConcurrencyLimiter): per namespace and key, lease id → expiry (ms, the store's clock). */
  readonly #leases = new Map<string, Map<string, number>>()
  /** The pages of `scanStored` left open. */
  readonly #scans = new OpenScans<StoredKey>()
  /** The clients' states, per namespace, in recency order (entry-tables.ts). */
  readonly #entries: EntryTables
  readonly #clock: () => number
  readonly #sweepMs: number
  /**
   * The background sweep, started by the store's first use (Workers forbid timers in global scope, where a store
   * is usually made); null once closed.
   */
  #timer: ReturnType<typeof realSetTimeout> | undefined | null

  constructor(options: MemoryStoreOptions = {}) {
    rejectUnknownOptions(options, MEMORY_STORE_OPTIONS, 'MemoryStore')
    const {
      clock = defaultEpochNow,
      maxKeys = MEMORY_STORE_DEFAULTS.maxKeys,
      sweepInterval = MEMORY_STORE_DEFAULTS.sweepInterval,
    } = options
    fnOption(clock, 'clock', 'a function returning epoch ms')
    wholeNumber(maxKeys, 'maxKeys', { min: 1, allowed: 'a positive whole number such as 100000' })
    this.#clock = clock
    this.maxKeys = maxKeys
    this.maxKeysGiven = options.maxKeys !== undefined
    this.#entries = new EntryTables(maxKeys)
    this.#sweepMs = parseTimerDuration(sweepInterval, 'sweepInterval')
  }

  /** Sweeps every `sweepInterval` on real time (unref'd): a test's fake timers never run it nor are held up by it. */
  #startSweeping(): void {
    const tick = () => {
      if (this.#timer === null) return
      this.#entries.sweepInSlices(this.#clock)
      this.#sweepLeases()
      this.#timer = realSetTimeout(tick, this.#sweepMs)
    }
    this.#timer = realSetTimeout(tick, this.#sweepMs)
  }

  /** Number of client keys held now (expired ones count until swept or touched). */
  get size(): number {
    return this.#entries.size
  }

  consume(request: StoreRequest): Decision {
    const now = this.#now()
    const entries = this.#entries
    const entry = entries.take(entries.table(request), this.#key(request), request.rules, now)
    const record = this.#record(request, now)
    const plan = planOf(request.plan, entry, true)
    const rules =
      record === undefined && entry.tuned === undefined && plan?.limits === undefined
        ? request.rules
        : tuneKey(request.rules, entry, record, now, plan)
    const decision = consumeKey(
      rules,
      entry,
      now,
      request.cost,
      request.penalty,
      request.reserve,
      record?.block,
    )
    entries.keep(entry, rules, request.penalty, now)
    return rules === request.rules && record === undefined && plan === undefined
      ? decision
      : underOverride(decision, request.rules, rules, record, plan)
  }

  /**
   * @internal `consume` written into the caller's record (`Store.decideInto`): the limiter's local path, which
   * allocates nothing. Leaves a request that reads overrides or reserves a slot, or a key whose limits an override
   * tuned, to `consume` (answers false, having changed nothing). Called only while `consume` is this class's
   * (`decidesInto`).
   */
  decideInto(request: StoreRequest, into: DecisionRecord): boolean {
    if (request.overrides !== undefined || request.reserve !== undefined) return false
    const now = this.#now()
    const entries = this.#entries
    const entry = entries.take(entries.table(request), this.#key(request), request.rules, now)
    // Converted by an override earlier (a live entry, which `take` left as it was): `consume` converts it back.
    if (entry.tuned !== undefined) return false
    const { rules, penalty } = request
    consumeKeyInto(into, rules, entry, now, request.cost, penalty)
    entries.keep(entry, rules, penalty, now)
    return true
  }

  peek(request: StoreRequest): Decision {
    const now = this.#now()
    const entry = liveAt(this.#entries.table(request).get(this.#key(request)), now)
    const plan = planOf(request.plan, entry, false)
    return peekKey(request.rules, entry, now, request.cost, request.penalty, this.#record(request, now), plan)
  }

  /** `Store.peekStored`: a peek at the client held as `id` (`StoredKey.hash`); a raw key's record is read too. */
  peekStored(request: StoreRequest, id: string): Decision {
    if (!id.startsWith('#')) return this.peek({ ...request, key: id })
    const now = this.#now()
    const entry = liveAt(this.#entries.table(request).get(id), now)
    const plan = planOf(request.plan, entry, false)
    return peekKey(request.rules, entry, now, request.cost, request.penalty, undefined, plan)
  }

  /**
   * `Store.scanStored`: a page of the keys held, each client's counters per namespace, then the override records;
   * each page resumes the walk where the last one stopped (`OpenScans`).
   */
  scanStored(page: { cursor?: string | undefined; count: number }): StoredKeyPage {
    const { items, cursor } = this.#scans.page('', page, this.#now(), (time) =>
      storedKeys(this.#entries.bySignature, this.#overrides.stored(time), time),
    )
    return { keys: items, foreign: 0, cursor }
  }

  refund(request: RefundRequest): void {
    this.#change(request, false, (rules, entry, now) =>
      refundKey(rules, entry, now, request.cost, request.at),
    )
  }

  charge(request: StoreRequest): Charged {
    let answer: Charged = { charged: 0 }
    this.#change(request, true, (rules, entry, now) => {
      const { charged, decision } = chargeKey(rules, entry, now, request.cost, request.maxDebt)
      answer = { charged, outcomes: decision.outcomes, now }
    })
    return answer
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
    return this.#overrides.list(scope, page, this.#now())
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
    const entries = this.#entries
    const table = entries.table(request)
    const entry = create
      ? entries.take(table, this.#key(request), request.rules, now)
      : liveAt(table.get(this.#key(request)), now)
    if (entry === undefined) return
    const plan = planOf(request.plan, entry, create)
    const rules = tuneKey(request.rules, entry, this.#record(request, now), now, plan)
    step(rules, entry, now)
    entries.keep(entry, rules, request.penalty, now)
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
    const entry = this.#entries.table(target).get(this.#key(target))
    if (entry !== undefined) this.#entries.remove(entry)
  }

  /** Drops every expired key now, in one pass. The background sweep does the same in slices. */
  sweep(): void {
    const now = this.#now()
    this.#overrides.sweep(now)
    this.#entries.sweep(now)
  }

  /**
   * Forgets every count, block, override and lease, for every limiter on this store: e.g. in a test's `beforeEach`, so that
   * each test starts with fresh counters on a store shared by the whole file. The store stays usable.
   */
  clear(): void {
    this.#leases.clear()
    this.#overrides.clear()
    this.#entries.clear()
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

  #key(target: { key: string }): string {
    return storedClientId(target.key)
  }
}

mirroredByDecideInto(MemoryStore.prototype.consume)

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
