import { createHash } from 'node:crypto'
import type { Rule } from '../algorithms/types.js'
import { type Duration, parseDuration } from '../duration.js'
import { invalid } from '../errors.js'
import { decideLocally } from './decide.js'
import type { Decision, RefundRequest, Store, StoreRequest, StoreTarget } from './types.js'

export interface MemoryStoreOptions {
  /** Current time in epoch ms. Inject one to drive time in tests and simulations. @default Date.now */
  clock?: () => number
  /**
   * Most client keys held at once. Past it the least recently used key is evicted (its client starts
   * afresh), so a flood of unique keys cannot exhaust memory. @default 100_000
   */
  maxKeys?: number
  /** How often a background sweep drops expired keys (the timer is unref'd). @default '1m' */
  sweepInterval?: Duration
}

interface Entry {
  /** One state per rule, in rule order. */
  states: unknown[]
  /** When every state equals a fresh one again (ms, the store's clock). */
  expiresAt: number
}

const SWEEP_SLICE = 5_000
/** Identifiers longer than this are hashed, so that a memory bound in keys is a bound in bytes too. */
const MAX_RAW_KEY_LENGTH = 128

/**
 * The embedded default store: state in this process's memory, sized to each algorithm (two integers for the
 * counters, a typed-array ring buffer for the log). Expired keys are dropped lazily and by an unref'd sweep;
 * no timer per key.
 *
 * Single process only: every process (cluster worker, pod) counts on its own. Use `RedisStore` to share
 * limits between processes.
 */
export class MemoryStore implements Store {
  readonly #entries = new Map<string, Entry>()
  readonly #signatures = new WeakMap<readonly Rule[], string>()
  readonly #clock: () => number
  readonly #maxKeys: number
  readonly #timer: NodeJS.Timeout
  #sweeping = false

  constructor(options: MemoryStoreOptions = {}) {
    const { clock = Date.now, maxKeys = 100_000, sweepInterval = '1m' } = options
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
    this.#timer = setInterval(() => this.#sweepInSlices(), parseDuration(sweepInterval, 'sweepInterval'))
    this.#timer.unref()
  }

  /** Number of client keys held now (expired ones count until swept or touched). */
  get size(): number {
    return this.#entries.size
  }

  consume(request: StoreRequest): Decision {
    const now = this.#clock()
    const id = this.#id(request)
    const entry = this.#take(id, request.rules, now)
    const decision = decideLocally(request.rules, entry.states, now, request.cost, true)
    this.#keep(id, entry, request.rules, now)
    return decision
  }

  peek(request: StoreRequest): Decision {
    const now = this.#clock()
    const entry = this.#entries.get(this.#id(request))
    // A copy: advancing the real state to a peeked time would corrupt it if the clock later reads earlier.
    const states =
      entry && entry.expiresAt > now
        ? structuredClone(entry.states)
        : request.rules.map((rule) => rule.logic.create())
    return decideLocally(request.rules, states, now, request.cost, false)
  }

  refund(request: RefundRequest): void {
    const now = this.#clock()
    const id = this.#id(request)
    const entry = this.#entries.get(id)
    if (entry === undefined || entry.expiresAt <= now) return
    request.rules.forEach((rule, i) => {
      rule.logic.advance(entry.states[i], now)
      rule.logic.refund(entry.states[i], now, request.cost, request.at)
    })
    this.#keep(id, entry, request.rules, now)
  }

  reset(target: StoreTarget): void {
    this.#entries.delete(this.#id(target))
  }

  /** Drops every expired key now, in one pass. The background sweep does the same in slices. */
  sweep(): void {
    const now = this.#clock()
    for (const [id, entry] of this.#entries) if (entry.expiresAt <= now) this.#entries.delete(id)
  }

  close(): void {
    clearInterval(this.#timer)
    this.#entries.clear()
  }

  #id(target: StoreTarget): string {
    let signature = this.#signatures.get(target.rules)
    if (signature === undefined) {
      signature = target.rules.map((rule) => rule.id).join(',')
      this.#signatures.set(target.rules, signature)
    }
    const key =
      target.key.length > MAX_RAW_KEY_LENGTH
        ? `#${createHash('sha256').update(target.key).digest('base64url')}`
        : target.key
    return `${signature}\u0000${target.prefix}\u0000${key}`
  }

  /** The entry for `id`, moved to the most-recently-used end; fresh if missing or expired. */
  #take(id: string, rules: readonly Rule[], now: number): Entry {
    const entry = this.#entries.get(id)
    if (entry !== undefined) {
      this.#entries.delete(id)
      if (entry.expiresAt > now) return entry
    } else if (this.#entries.size >= this.#maxKeys) {
      // Map iteration order is insertion order, and every use re-inserts: the first key is the least recent.
      const oldest = this.#entries.keys().next()
      if (!oldest.done) this.#entries.delete(oldest.value)
    }
    return { states: rules.map((rule) => rule.logic.create()), expiresAt: 0 }
  }

  #keep(id: string, entry: Entry, rules: readonly Rule[], now: number): void {
    let ttl = 0
    for (let i = 0; i < rules.length; i++) ttl = Math.max(ttl, rules[i]!.logic.ttl(entry.states[i], now))
    if (ttl <= 0) {
      this.#entries.delete(id)
      return
    }
    entry.expiresAt = now + ttl
    this.#entries.set(id, entry)
  }

  /** Sweeps in slices of SWEEP_SLICE keys, yielding to the event loop between slices. */
  #sweepInSlices(): void {
    if (this.#sweeping) return
    this.#sweeping = true
    const entries = this.#entries.entries()
    const slice = () => {
      const now = this.#clock()
      for (let i = 0; i < SWEEP_SLICE; i++) {
        const next = entries.next()
        if (next.done) {
          this.#sweeping = false
          return
        }
        if (next.value[1].expiresAt <= now) this.#entries.delete(next.value[0])
      }
      setImmediate(slice)
    }
    slice()
  }
}
