import { invalid } from './errors.js'
import type { RateLimitResult } from './result.js'

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
}

/**
 * Remembers denied keys until their `retryAfter` has passed, so that a flood from a blocked client is answered
 * in process without a store call. Answers stay truthful: waits shrink by the time elapsed since the denial.
 * A denial can only get longer through other traffic, never shorter, except by `reset` or `refund`, which
 * clear the entry.
 */
export class BlockedCache {
  readonly #entries = new Map<string, Blocked>()
  readonly #maxKeys: number
  readonly #clock: () => number

  constructor(options: BlockedCacheOptions = {}) {
    const { maxKeys = 10_000, clock = () => performance.now() } = options
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'blockedCache.maxKeys',
        maxKeys,
        'a positive whole number such as 10000',
      )
    }
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
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    const now = this.#clock()
    if (now >= entry.until) {
      this.#entries.delete(key)
      return undefined
    }
    // A cheaper request than the one denied might pass: ask the store.
    if (cost < entry.result.cost) return undefined
    const elapsed = Math.floor(now - entry.since)
    const shrink = (ms: number) => Math.max(0, ms - elapsed)
    const { result } = entry
    return {
      ...result,
      cost,
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
    if (!this.#entries.has(key) && this.#entries.size >= this.#maxKeys) {
      const oldest = this.#entries.keys().next()
      if (!oldest.done) this.#entries.delete(oldest.value)
    }
    const now = this.#clock()
    this.#entries.delete(key)
    this.#entries.set(key, { result, since: now, until: now + result.retryAfter })
  }

  delete(key: string): void {
    this.#entries.delete(key)
  }
}
