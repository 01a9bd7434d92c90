/**
 * The decision writer: a limiter's result in HTTP terms (headers, status, denial), the in-flight slot added to
 * it, and the headers rewritten after a settle. The partition key is computed, and the RateLimit headers built,
 * in one place each.
 */
import { fixedWindow } from '../algorithms/index.js'
import type { Rule } from '../algorithms/types.js'
import type { ConcurrencyResult } from '../limiter/concurrency.js'
import type { RateLimiter } from '../limiter/limiter.js'
import { enforcedView, LimitResult, type RateLimitResult, refusingQuota } from '../result.js'
import type { FrameworkBinding } from './binding.js'
import type { HttpConfig } from './config.js'
import {
  addConcurrencyHeaders,
  type HeaderOptions,
  partitionKey,
  rateLimitHeaders,
  softLimitField,
  toSeconds,
} from './headers.js'
import type { SlotHold } from './slots.js'

/** A decision in HTTP terms: what to send. Plain data; `body` and `track` are methods of the engine. */
export interface HttpDecision {
  result: RateLimitResult
  /** Headers to set on the response, allowed or not. */
  headers: Record<string, string>
  /** The status of a denial (429, or 503 when the failure policy denied, or `penalty.statusCode` while blocked). */
  statusCode: number
  /** @internal The limiter that decided (the one to refund through); none for a deny-listed request. */
  limiter: RateLimiter | undefined
  /**
   * The in-flight slot this request holds (option `concurrency`), released by `track`. Adapters read whether
   * there is one (not marked internal: their declarations are built against core's).
   */
  slot?: ConcurrencyResult
  /** @internal When that slot is given back, armed by `track`. */
  hold?: SlotHold
  /**
   * The client left before its request was decided: nothing was counted and nobody waits for an answer. Adapters
   * write nothing (or, where the framework needs an answer, an empty one with `statusCode`), run no handler for
   * it (the `handler` option included) and pass it on to nothing.
   */
  gone?: true
}

/** The rule a deny-listed result names when no rule set was resolved yet. */
const DENIED_RULE: Rule = fixedWindow({ limit: 1, window: '1m', name: 'denied' })

/**
 * The `Retry-After` of a request refused for want of an in-flight slot, ms: the HTTP engine's `concurrency`, and
 * `@ratewindow/ws`'s connection slots.
 */
export const NO_SLOT_RETRY_AFTER_MS = 1_000

/** Writes each decision of one middleware in HTTP terms, after its resolved options. */
export class DecisionWriter<Req> {
  readonly #config: HttpConfig<Req>
  readonly #writeHeaders: FrameworkBinding<Req>['writeHeaders']
  /** The header options of a decision without a partition key: made once. */
  readonly #headerOptions: HeaderOptions
  /** Whether headers carry a partition key: a secret, and a draft that has one. */
  readonly #partitioned: boolean

  constructor(config: HttpConfig<Req>, binding: FrameworkBinding<Req>) {
    this.#config = config
    this.#writeHeaders = binding.writeHeaders
    this.#headerOptions = { format: config.headers, legacy: config.legacyHeaders }
    const format = config.headers
    this.#partitioned = Boolean(config.partitionKeySecret) && (format === 'draft-8' || format === 'draft-11')
  }

  /** The limiter's result as a decision; an admitted one gets `settle` (reserve-then-settle). */
  admitted(limiter: RateLimiter, result: RateLimitResult): HttpDecision {
    const config = this.#config
    // The limiter's own results are settleable already; a shadow mode's copy is made so once.
    if (result.allowed && result.source !== 'policy' && !(result instanceof LimitResult))
      result = LimitResult.of(limiter, result)
    const policy = result.source === 'policy'
    // The failure policy and a shed decision know no quota: Retry-After only, no RateLimit headers.
    const quotaUnknown = policy || result.source === 'shed'
    // Shadow mode: headers describe the enforcing rules only; a shadow limiter sends none (docs/rollout.md).
    const shown = limiter.shadow ? undefined : enforcedView(result)
    if (shown === undefined) return { result, headers: {}, statusCode: config.statusCode, limiter }
    const headers = quotaUnknown
      ? result.allowed
        ? {}
        : { 'Retry-After': String(toSeconds(result.retryAfter)) }
      : this.#rateLimitHeaders(shown, this.#partitionKeyOf(result.key))
    const statusCode = policy
      ? 503
      : result.blocked !== undefined
        ? (limiter.penalty?.statusCode ?? config.statusCode)
        : refusingQuota(result) !== undefined
          ? config.quotaStatusCode
          : config.statusCode
    return { result, headers, statusCode, limiter }
  }

  /**
   * Adds the in-flight slot to an admitted decision, or, when no slot is free, the denial in its place (the
   * caller gives the rate limit charge back).
   */
  withSlot(decision: HttpDecision, slot: ConcurrencyResult): HttpDecision {
    const config = this.#config
    const format = config.headers
    const pk = this.#partitionKeyOf(decision.result.key)
    if (slot.allowed) {
      if (slot.source === 'store') this.#addSlotHeaders(decision.headers, slot, pk)
      return { ...decision, slot }
    }
    const retryAfter = NO_SLOT_RETRY_AFTER_MS
    const result: RateLimitResult = { ...decision.result, allowed: false, remaining: 0, retryAfter }
    delete result.settle
    const headers: Record<string, string> =
      slot.source === 'policy'
        ? { 'Retry-After': String(toSeconds(retryAfter)) }
        : addConcurrencyHeaders(
            format === 'draft-8' || format === 'draft-11'
              ? {
                  'RateLimit-Policy': decision.headers['RateLimit-Policy'] ?? '',
                  'Retry-After': String(toSeconds(retryAfter)),
                }
              : { 'Retry-After': String(toSeconds(retryAfter)) },
            format,
            { name: config.concurrency!.name, limit: slot.limit, remaining: 0 },
            { partitionKey: pk },
          )
    return {
      result,
      headers,
      statusCode: slot.source === 'policy' ? 503 : config.statusCode,
      limiter: decision.limiter,
    }
  }

  /** A deny-listed request: refused before any store call, without RateLimit headers. */
  denied(key: string, limiter: RateLimiter | undefined): HttpDecision {
    const rule = limiter?.rules[0] ?? DENIED_RULE
    const result: RateLimitResult = {
      allowed: false,
      limit: rule.limit,
      remaining: 0,
      reset: 0,
      retryAfter: 0,
      key,
      cost: 0,
      at: Date.now(),
      rule,
      rules: [],
      source: 'deny-list',
    }
    return { result, headers: {}, statusCode: this.#config.denyStatusCode, limiter }
  }

  /** A request whose client left before it was decided (`gone`): nothing counted, refused to nobody, no headers. */
  gone(limiter: RateLimiter | undefined): HttpDecision {
    return { ...this.denied('', limiter), statusCode: this.#config.statusCode, gone: true }
  }

  /** A request whose client left while it waited for its reserved slot: refused (to nobody), no headers. */
  abandoned(limiter: RateLimiter, result: RateLimitResult): HttpDecision {
    return {
      result: { ...result, allowed: false, retryAfter: result.delay! },
      headers: {},
      statusCode: this.#config.statusCode,
      limiter,
    }
  }

  /**
   * After `req.rateLimit.settle(n)` changed the charge, the RateLimit headers of `target` follow the settled
   * result, as long as they have not been sent (the binding's `writeHeaders`). Costs two field writes, no closure.
   */
  follow(decision: HttpDecision, target: unknown): void {
    const { result, limiter } = decision
    if (result instanceof LimitResult && this.#writeHeaders !== undefined && !limiter?.shadow)
      result.follow(this, target, decision.slot)
  }

  /** The headers of a settled result, written to `target` (see `follow`). */
  rewrite(result: RateLimitResult, target: unknown, slot: unknown): void {
    const shown = enforcedView(result)
    if (shown === undefined) return
    const pk = this.#partitionKeyOf(result.key)
    const headers = this.#rateLimitHeaders(shown, pk)
    const held = slot as ConcurrencyResult | undefined
    if (held?.allowed && held.source === 'store') this.#addSlotHeaders(headers, held, pk)
    this.#writeHeaders!(target, headers)
  }

  /** The draft-8/-11 partition key of `key`, when headers carry one. */
  #partitionKeyOf(key: string): string | undefined {
    return this.#partitioned ? partitionKey(key, this.#config.partitionKeySecret!) : undefined
  }

  #rateLimitHeaders(shown: RateLimitResult, pk: string | undefined): Record<string, string> {
    const config = this.#config
    const headers = rateLimitHeaders(
      shown,
      pk === undefined
        ? this.#headerOptions
        : { format: config.headers, legacy: config.legacyHeaders, partitionKey: pk },
    )
    if (config.warnHeader && shown.allowed) {
      const warning = softLimitField(shown)
      if (warning !== undefined) headers['RateLimit-Warning'] = warning
    }
    return headers
  }

  /** The concurrency policy and the free slots of an admitted request, added to `headers`. */
  #addSlotHeaders(headers: Record<string, string>, slot: ConcurrencyResult, pk: string | undefined): void {
    const info = { name: this.#config.concurrency!.name, limit: slot.limit, remaining: slot.remaining }
    addConcurrencyHeaders(headers, this.#config.headers, info, { partitionKey: pk })
  }
}
