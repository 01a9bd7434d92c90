import { type RateLimitResult, refusingQuota } from '../result.js'
import { invalid } from '../support/errors.js'
import { wholeNumber } from '../support/validators.js'

export interface BlockedCacheOptions {
  /** Most denied keys remembered; the oldest is dropped past it. @default 10_000 */
  maxKeys?: number
  /** Time source in ms. @default performance.now */
  clock?: () => number
}

interface Blocked {
  result: RateLimitResult
  /** Local time of the denial. */
  since: number
  /** Local time the denial ends. */
  until: number
  /** Local time the entry is dropped: the denial's end, or sooner for a quota's (`QUOTA_HOLD_MS`). */
  holdUntil: number
}

/**
 * The longest a quota's refusal is answered from the cache: its period may last a month, and a raise or a credit
 * given to the key in another process must take effect within this, not at the period's end.
 */
export const QUOTA_HOLD_MS = 60_000

/** `BlockedCacheOptions`' defaults, in one place (the `@default` tag above says the same). */
export const BLOCKED_CACHE_DEFAULTS = { maxKeys: 10_000 } as const satisfies BlockedCacheOptions

/** Distinct costs remembered per key; the oldest is dropped past it. */
const MAX_COSTS_PER_KEY = 8

/**
 * Remembers denied keys until their `retryAfter` has passed, so that a flood from a blocked client is answered
 * in process without a store call. Answers stay truthful: waits shrink by the time elapsed since the denial.
 * A denial can only get longer through other traffic, never shorter, except by `reset` or `refund`, which
 * clear the entry.
 *
 * Denials are remembered per cost: a costlier request waits longer than a cheaper one, and a cheaper one may
 * pass, so a request of a cost not seen yet asks the store (once, then it is cached too).
 */
export class BlockedCache {
  /** Denials by key, then by cost; keys in least recently denied order. */
  readonly #entries = new Map<string, Map<number, Blocked>>()
  readonly #maxKeys: number
  readonly #clock: () => number

  constructor(options: BlockedCacheOptions = {}) {
    const { maxKeys = BLOCKED_CACHE_DEFAULTS.maxKeys, clock = () => performance.now() } = options
    wholeNumber(maxKeys, 'blockedCache.maxKeys', { min: 1, allowed: 'a positive whole number such as 10000' })
    if (typeof clock !== 'function') {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'blockedCache.clock', clock, 'a function returning ms')
    }
    this.#maxKeys = maxKeys
    this.#clock = clock
  }

  get size(): number {
    return this.#entries.size
  }

  /** The cached denial for `key` and a request of `cost`, with waits brought to now; undefined if none. */
  get(key: string, cost: number): RateLimitResult | undefined {
    const byCost = this.#entries.get(key)
    // Another cost's denial does not tell this request's wait: ask the store.
    const entry = byCost?.get(cost)
    if (byCost === undefined || entry === undefined) return undefined
    const now = this.#clock()
    if (now >= entry.holdUntil) {
      byCost.delete(cost)
      if (byCost.size === 0) this.#entries.delete(key)
      return undefined
    }
    const elapsed = Math.floor(now - entry.since)
    const shrink = (ms: number) => Math.max(0, ms - elapsed)
    const { result } = entry
    return {
      ...result,
      at: result.at + elapsed,
      reset: shrink(result.reset),
      retryAfter: Math.max(1, Math.ceil(entry.until - now)),
      rules: result.rules.map((rule) => ({
        ...rule,
        reset: shrink(rule.reset),
        retryAfter: shrink(rule.retryAfter),
      })),
      source: 'cache',
    }
  }

  set(key: string, result: RateLimitResult): void {
    if (result.allowed || result.retryAfter <= 0) return
    let byCost = this.#entries.get(key)
    if (byCost === undefined) {
      if (this.#entries.size >= this.#maxKeys) {
        const oldest = this.#entries.keys().next()
        if (!oldest.done) this.#entries.delete(oldest.value)
      }
      byCost = new Map()
    } else this.#entries.delete(key)
    this.#entries.set(key, byCost)
    byCost.delete(result.cost)
    if (byCost.size >= MAX_COSTS_PER_KEY) byCost.delete(byCost.keys().next().value!)
    const now = this.#clock()
    const until = now + result.retryAfter
    const holdUntil = refusingQuota(result) === undefined ? until : Math.min(until, now + QUOTA_HOLD_MS)
    byCost.set(result.cost, { result, since: now, until, holdUntil })
  }

  delete(key: string): void {
    this.#entries.delete(key)
  }
}
