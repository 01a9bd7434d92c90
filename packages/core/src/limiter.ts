import { LOG_MAX_COST } from './algorithms/sliding-window-log.js'
import type { Rule } from './algorithms/types.js'
import { BlockedCache, type BlockedCacheOptions } from './blocked-cache.js'
import { type Duration, parseTimerDuration } from './duration.js'
import { describeValue, invalid, RateLimitError, requireObject } from './errors.js'
import { CircuitBreaker, type CircuitBreakerOptions, throttledErrorLog, withTimeout } from './failure.js'
import { parseRules } from './options.js'
import { policyResult, type RateLimitResult, toResult } from './result.js'
import { MemoryStore } from './stores/memory.js'
import type { Store, StoreRequest } from './stores/types.js'

/** What failed, for `onError`. */
export interface FailureContext {
  operation: 'consume' | 'peek' | 'refund' | 'fallback'
  key: string
}

export interface RateLimiterOptions {
  /** One rule or several; a request must pass all of them, and one denied by any consumes from none. */
  rules: Rule | readonly Rule[]
  /** Where state lives. @default new MemoryStore() */
  store?: Store
  /** Namespace for this limiter's keys, so limiters can share a store. @default 'rw' */
  prefix?: string
  /** Longest wait for an asynchronous store before the failure policy answers instead. @default '250ms' */
  timeout?: Duration
  /**
   * When the store fails or times out (and no `fallback` answers): `'allow'` lets the request through
   * (fail open), `'deny'` refuses it (fail closed; adapters answer 503). @default 'allow'
   */
  onStoreError?: 'allow' | 'deny'
  /** A store that answers while the main one fails, e.g. `new MemoryStore()`: limits per process meanwhile. */
  fallback?: Store
  /** Receives every store failure. @default a throttled console.error (first failure, then one line per 10 s) */
  onError?: (error: unknown, context: FailureContext) => void
  /** Stop waiting on a store that keeps failing, and probe it again later; `false` to disable. @default {} */
  circuitBreaker?: CircuitBreakerOptions | false
  /**
   * Remember denied keys until their `retryAfter` passes and answer them without a store call. Worth it with
   * Redis under floods; uses local time, so leave it off when the store's clock is simulated. @default false
   */
  blockedCache?: BlockedCacheOptions | boolean
}

export interface LimitOptions {
  /** Whole units this request costs; 0 checks without consuming. @default 1 */
  cost?: number
}

/**
 * Applies rules to client identifiers through a store.
 * @example
 * const limiter = new RateLimiter({ rules: slidingWindowCounter({ limit: 100, window: '1m' }) })
 * const result = await limiter.limit('user:alice')
 * if (!result.allowed) console.log(`retry in ${result.retryAfter} ms`)
 */
export class RateLimiter {
  readonly rules: readonly Rule[]
  readonly store: Store
  readonly prefix: string
  /** The largest cost every rule accepts (the smallest limit, or a rule's own cap): no cost above it passes. */
  readonly maxCost: number
  readonly #timeout: number
  readonly #allowOnError: boolean
  readonly #fallback: Store | undefined
  readonly #onError: (error: unknown, context: FailureContext) => void
  readonly #breaker: CircuitBreaker | undefined
  readonly #blocked: BlockedCache | undefined

  constructor(options: RateLimiterOptions) {
    requireObject(options, 'options', '{ rules: slidingWindowCounter(...) }')
    this.rules = parseRules(options.rules)
    this.store = options.store ?? new MemoryStore()
    if (typeof this.store.consume !== 'function' || typeof this.store.peek !== 'function') {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'store',
        options.store,
        'a Store such as new MemoryStore()',
      )
    }
    this.prefix = options.prefix ?? 'rw'
    if (typeof this.prefix !== 'string' || this.prefix.length > 64 || /[{}]/.test(this.prefix)) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'prefix',
        options.prefix,
        'a string of at most 64 characters without `{` or `}`',
      )
    }
    this.maxCost = Math.min(...this.rules.map((rule) => rule.maxCost))
    this.#timeout = parseTimerDuration(options.timeout ?? '250ms', 'timeout')
    const {
      onStoreError = 'allow',
      fallback,
      onError = throttledErrorLog(),
      circuitBreaker = {},
      blockedCache,
    } = options
    if (onStoreError !== 'allow' && onStoreError !== 'deny') {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'onStoreError', onStoreError, "'allow' or 'deny'")
    }
    if (fallback !== undefined && typeof fallback?.consume !== 'function') {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'fallback',
        fallback,
        'a Store such as new MemoryStore()',
      )
    }
    if (typeof onError !== 'function')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'onError', onError, 'a function')
    this.#allowOnError = onStoreError === 'allow'
    this.#fallback = fallback
    this.#onError = onError
    if (circuitBreaker !== false && (typeof circuitBreaker !== 'object' || circuitBreaker === null)) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'circuitBreaker',
        circuitBreaker,
        'an object like { failures: 5, cooldown: "2s" }, or false',
      )
    }
    if (
      blockedCache !== undefined &&
      typeof blockedCache !== 'boolean' &&
      (typeof blockedCache !== 'object' || blockedCache === null)
    ) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'blockedCache',
        blockedCache,
        'true, false, or an object like { maxKeys: 10000 }',
      )
    }
    this.#breaker = circuitBreaker === false ? undefined : new CircuitBreaker(circuitBreaker)
    this.#blocked = blockedCache ? new BlockedCache(blockedCache === true ? {} : blockedCache) : undefined
  }

  /** Decides for one request of `key` and records it when allowed. Never rejects for a store failure. */
  async limit(key: string, options?: LimitOptions): Promise<RateLimitResult> {
    const request = this.#request(key, options?.cost)
    const cached = this.#blocked?.get(key, request.cost)
    if (cached !== undefined) return cached
    const result = await this.#decide(request, 'consume')
    if (!result.allowed && result.source === 'store') this.#blocked?.set(key, result)
    return result
  }

  /** The result `limit` would give now, without consuming anything. */
  async peek(key: string, options?: LimitOptions): Promise<RateLimitResult> {
    return this.#decide(this.#request(key, options?.cost), 'peek')
  }

  /**
   * Gives back an admitted request, e.g. one whose response should not count. Pass its result. A failure is
   * reported to `onError`, never thrown.
   */
  async refund(result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'allowed' | 'source'>): Promise<void> {
    if (!result.allowed || result.cost === 0 || result.source === 'policy') return
    const request = this.#request(result.key, result.cost)
    this.#blocked?.delete(result.key)
    const store = result.source === 'fallback' ? this.#fallback! : this.store
    try {
      await withTimeout(
        Promise.resolve(store.refund({ ...request, at: result.at })),
        this.#timeout,
        'store.refund',
      )
    } catch (error) {
      this.#onError(error, { operation: 'refund', key: result.key })
    }
  }

  /** Forgets everything about `key` (in the fallback store too). Rejects if the store fails. */
  async reset(key: string): Promise<void> {
    checkKey(key)
    this.#blocked?.delete(key)
    const target = { prefix: this.prefix, key, rules: this.rules }
    await Promise.all([this.store.reset(target), this.#fallback?.reset(target)])
  }

  /** The store's answer, or the fallback's, or the failure policy's; never a rejection for a store failure. */
  async #decide(request: StoreRequest, operation: 'consume' | 'peek'): Promise<RateLimitResult> {
    if (this.#breaker?.allows() ?? true) {
      try {
        const pending = this.store[operation](request)
        const decision = isThenable(pending)
          ? await withTimeout(Promise.resolve(pending), this.#timeout, `store.${operation}`)
          : pending
        this.#breaker?.success()
        for (const notice of decision.notices ?? []) this.#onError(notice, { operation, key: request.key })
        return toResult(request, decision, 'store')
      } catch (error) {
        this.#breaker?.failure()
        this.#onError(error, { operation, key: request.key })
      }
    }
    if (this.#fallback !== undefined) {
      try {
        return toResult(request, await this.#fallback[operation](request), 'fallback')
      } catch (error) {
        this.#onError(error, { operation: 'fallback', key: request.key })
      }
    }
    return policyResult(request, this.#allowOnError, Math.max(1_000, this.#breaker?.retryIn ?? 0))
  }

  #request(key: string, cost: number | undefined = 1): StoreRequest {
    checkKey(key)
    if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
      throw invalid('ERR_RATEWINDOW_INVALID_COST', 'cost', cost, 'a whole number >= 0')
    }
    if (cost > this.maxCost) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
        `\`cost\` ${cost} exceeds the largest cost the rules accept (${this.maxCost}: the smallest limit, and at most ${LOG_MAX_COST} for a sliding window log): such a request could never pass. Lower the cost or raise the limit.`,
        { option: 'cost' },
      )
    }
    return { prefix: this.prefix, key, rules: this.rules, cost }
  }
}

function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_KEY',
      `The key must be a string; received ${describeValue(key)}.`,
      {
        option: 'key',
      },
    )
  }
}

/**
 * Whether a store's answer is asynchronous: any thenable, not only this realm's `Promise` (a custom store may
 * return another realm's promises or a library's thenables; `instanceof Promise` missed both).
 */
function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  )
}
