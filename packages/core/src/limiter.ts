import type { Rule, RuleOutcome } from './algorithms/types.js'
import { BlockedCache, type BlockedCacheOptions } from './blocked-cache.js'
import { type Duration, parseDuration } from './duration.js'
import { describeValue, invalid, RateLimitError } from './errors.js'
import { CircuitBreaker, type CircuitBreakerOptions, throttledErrorLog, withTimeout } from './failure.js'
import { MemoryStore } from './stores/memory.js'
import type { Decision, Store, StoreRequest } from './stores/types.js'

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

/** One rule's part of a result. */
export interface RuleResult extends RuleOutcome {
  rule: Rule
  /** Whether this rule admits the request. */
  allowed: boolean
}

/** Where a decision came from. */
export type DecisionSource = 'store' | 'fallback' | 'policy' | 'cache'

/**
 * A truthful decision. Times are whole milliseconds. `limit`, `remaining` and `reset` describe the reported
 * rule: on a denial the one that blocks longest, otherwise the one with the fewest requests left.
 */
export interface RateLimitResult {
  allowed: boolean
  limit: number
  /** How many cost-1 requests would still pass now (across all rules). */
  remaining: number
  /** Wait until the reported rule's whole quota is free again, if nothing else arrived. */
  reset: number
  /** Smallest wait after which the same request passes if nothing else arrives (0 when allowed). */
  retryAfter: number
  /** The identifier that was limited. */
  key: string
  cost: number
  /** Decision time in epoch ms, from the store's clock. Pass it back to `refund`. */
  at: number
  /** The reported rule. */
  rule: Rule
  /** Every rule's outcome, in rule order. */
  rules: RuleResult[]
  source: DecisionSource
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
  /** The smallest limit among the rules: no cost above it can ever pass. */
  readonly maxCost: number
  readonly #timeout: number
  readonly #allowOnError: boolean
  readonly #fallback: Store | undefined
  readonly #onError: (error: unknown, context: FailureContext) => void
  readonly #breaker: CircuitBreaker | undefined
  readonly #blocked: BlockedCache | undefined

  constructor(options: RateLimiterOptions) {
    if (typeof options !== 'object' || options === null) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'options',
        options,
        'an object like { rules: slidingWindowCounter(...) }',
      )
    }
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
    this.maxCost = Math.min(...this.rules.map((rule) => rule.limit))
    this.#timeout = parseDuration(options.timeout ?? '250ms', 'timeout')
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
        const decision =
          pending instanceof Promise
            ? await withTimeout(pending, this.#timeout, `store.${operation}`)
            : pending
        this.#breaker?.success()
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
        `\`cost\` ${cost} exceeds the smallest limit (${this.maxCost}): such a request could never pass. Lower the cost or raise the limit.`,
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

/** Validates `rules`: one rule or a non-empty array of rules with distinct storage ids. */
export function parseRules(rules: unknown): readonly Rule[] {
  const list = Array.isArray(rules) ? rules : [rules]
  if (list.length === 0)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'rules', rules, 'a rule or a non-empty array of rules')
  const ids = new Set<string>()
  list.forEach((rule: unknown, i) => {
    if (!isRule(rule)) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        Array.isArray(rules) ? `rules[${i}]` : 'rules',
        rule,
        'a rule made by fixedWindow, slidingWindowLog, slidingWindowCounter or tokenBucket',
      )
    }
    if (ids.has(rule.id)) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_DUPLICATE_RULE',
        `\`rules[${i}]\` repeats a ${rule.algorithm} rule with the same window; merge them or change one window.`,
        { option: `rules[${i}]` },
      )
    }
    ids.add(rule.id)
  })
  return Object.freeze([...list])
}

function isRule(value: unknown): value is Rule {
  return typeof value === 'object' && value !== null && 'logic' in value && 'script' in value && 'id' in value
}

/**
 * The failure policy's answer: the store could not decide. `limit` is the first rule's, `remaining` and
 * `reset` are unknown (reported as 0); adapters write no RateLimit headers for it.
 */
function policyResult(request: StoreRequest, allowed: boolean, retryAfter: number): RateLimitResult {
  const rule = request.rules[0]!
  return {
    allowed,
    limit: rule.limit,
    remaining: 0,
    reset: 0,
    retryAfter: allowed ? 0 : retryAfter,
    key: request.key,
    cost: request.cost,
    at: Date.now(),
    rule,
    rules: request.rules.map((each) => ({
      rule: each,
      allowed,
      remaining: 0,
      reset: 0,
      retryAfter: allowed ? 0 : retryAfter,
    })),
    source: 'policy',
  }
}

/** Builds the public result from a store decision. */
export function toResult(request: StoreRequest, decision: Decision, source: DecisionSource): RateLimitResult {
  const { rules, key, cost } = request
  const { outcomes, allowed } = decision
  const results: RuleResult[] = new Array(outcomes.length)
  let reported = 0
  let remaining = Number.POSITIVE_INFINITY
  for (let i = 0; i < outcomes.length; i++) {
    const outcome = outcomes[i]!
    results[i] = {
      rule: rules[i]!,
      allowed: allowed || outcome.retryAfter === 0,
      remaining: outcome.remaining,
      reset: outcome.reset,
      retryAfter: outcome.retryAfter,
    }
    remaining = Math.min(remaining, outcome.remaining)
    const best = outcomes[reported]!
    const worse = allowed
      ? outcome.remaining < best.remaining ||
        (outcome.remaining === best.remaining && outcome.reset > best.reset)
      : outcome.retryAfter > best.retryAfter
    if (worse) reported = i
  }
  const rule = results[reported]!
  return {
    allowed,
    limit: rule.rule.limit,
    remaining,
    reset: rule.reset,
    retryAfter: allowed ? 0 : rule.retryAfter,
    key,
    cost,
    at: decision.now,
    rule: rule.rule,
    rules: results,
    source,
  }
}
