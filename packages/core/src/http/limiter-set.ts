/**
 * The limiters of one middleware: the fixed one, one per limit of a `limit` function, one per rule set of a
 * `rules` function (both bounded), and the choice of limiter and cost for a request.
 */

import type { Rule } from '../algorithms/types.js'
import { RateLimiter } from '../limiter/limiter.js'
import { type Identity, namespaceOf } from '../limiter/namespaces.js'
import { LIMITER_DEFAULTS, parseRules } from '../limiter/options.js'
import type { Awaitable } from '../stores/types.js'
import { RateLimitError } from '../support/errors.js'
import { wholeNumber } from '../support/validators.js'
import type { HttpConfig } from './config.js'
import type { ResolvedRules } from './options.js'

/** The most limiters kept per `limit` or `rules` function: the oldest goes first. */
const MAX_DYNAMIC_LIMITS = 1_000

/** The limiter that decides a request, and the cost it charges (undefined: the limiter's default). */
export interface LimiterChoice {
  limiter: RateLimiter
  cost: number | undefined
  /** With `plans`: the request's plan (`plan`); undefined for the limiter's default. */
  plan?: string | undefined
}

/** Every limiter of one middleware, made on demand for function limits and rule sets, and bounded. */
export class LimiterSet<Req> {
  readonly #config: HttpConfig<Req>
  readonly #identity: Identity
  readonly #limiters = new Map<number, RateLimiter>()
  /** Limiters of a `rules` function: by the object it returned, then by rule-set signature (bounded). */
  readonly #resolved = new WeakMap<object, LimiterChoice>()
  readonly #bySignature = new Map<string, RateLimiter>()
  /** The limiter of every request, when neither the limit nor the rules are a function. */
  readonly fixed: RateLimiter | undefined
  /** The choice of every request, when the limiter is fixed and the cost a number: made once. */
  readonly #fixedChoice: LimiterChoice | undefined
  /** The first limiter: undefined for a `rules` function until its first request. */
  #first: RateLimiter | undefined

  constructor(config: HttpConfig<Req>, identity: Identity) {
    this.#config = config
    this.#identity = identity
    if (config.resolveRules !== undefined) {
      this.fixed = undefined
      this.#first = undefined
    } else if (config.limiter.plans !== undefined) {
      // One limiter for every plan: the plan goes with each request.
      this.fixed = new RateLimiter(config.limiter, identity)
      this.#first = this.fixed
    } else if (config.rules !== undefined) {
      this.fixed = new RateLimiter({ ...config.limiter, rules: config.rules }, identity)
      this.#first = this.fixed
    } else {
      const { limit } = config
      // Built now even for a function limit, so that a bad `window` or a shared namespace fails at construction.
      this.#first = this.forLimit(typeof limit === 'number' ? limit : 1)
      this.fixed = typeof limit === 'number' ? this.#first : undefined
    }
    const { cost } = config
    this.#fixedChoice =
      this.fixed !== undefined && typeof cost !== 'function' && config.plan === undefined
        ? { limiter: this.fixed, cost }
        : undefined
  }

  /**
   * Refuses at construction what no request could pass: `delay` without rules and a store that reserve (for the
   * rules known now: a `rules` or `limit` function's are checked when first resolved), a `cost` over the limit.
   */
  refuseImpossible(): void {
    const { cost, delay } = this.#config
    if (delay !== undefined) this.#first?.checkReservations('delay')
    if (typeof cost === 'number' && this.fixed && cost > this.fixed.maxCost) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
        `\`cost\` ${cost} exceeds the limit (${this.fixed.maxCost}): no request could ever pass. Lower the cost or raise the limit.`,
        { option: 'cost' },
      )
    }
  }

  /** The first limiter made: undefined for a `rules` function until its first request. */
  get first(): RateLimiter | undefined {
    return this.#first
  }

  /**
   * The namespace of the middleware's first limiter, or, before a `rules` function's first request, the one its
   * prefix, group and qualifier give (where its concurrency slots live).
   */
  get baseNamespace(): string {
    const { prefix, group } = this.#config.limiter
    return this.#first?.namespace ?? namespaceOf(prefix ?? LIMITER_DEFAULTS.prefix, [], group, this.#identity)
  }

  /** Every limiter made so far. */
  all(): Set<RateLimiter> {
    const all = new Set<RateLimiter>([...this.#limiters.values(), ...this.#bySignature.values()])
    if (this.#first !== undefined) all.add(this.#first)
    return all
  }

  /**
   * The limiter and cost of `request`: fixed ones at once, else the answers of the `cost`, `limit` or `rules`
   * function (which may be promises).
   */
  choose(request: Req): Awaitable<LimiterChoice> {
    return this.#fixedChoice ?? this.#chooseDynamic(request)
  }

  async #chooseDynamic(request: Req): Promise<LimiterChoice> {
    const config = this.#config
    let cost = typeof config.cost === 'function' ? await config.cost(request) : config.cost
    let limiter = this.fixed
    if (limiter === undefined) {
      if (config.resolveRules !== undefined) {
        const resolved = this.#forRules(await config.resolveRules(request))
        limiter = resolved.limiter
        if (resolved.cost !== undefined) cost = resolved.cost
      } else limiter = this.forLimit(await (config.limit as (request: Req) => Awaitable<number>)(request))
    }
    if (config.plan !== undefined) return { limiter, cost, plan: await config.plan(request) }
    return { limiter, cost }
  }

  /**
   * The limiter of what a `rules` function returned: found by the object itself (a plan built once costs one
   * lookup), else validated and found or made by its rule-set signature, so that equal rule sets share one
   * limiter and different ones never share counters. Throws a `RateLimitError` for a bad value.
   */
  #forRules(value: ResolvedRules): LimiterChoice {
    const known = typeof value === 'object' && value !== null ? this.#resolved.get(value) : undefined
    if (known !== undefined) return known
    const withCost = typeof value === 'object' && value !== null && !Array.isArray(value) && 'rules' in value
    const rules = parseRules(withCost ? (value as { rules: unknown }).rules : value)
    let cost: number | undefined
    if (withCost) {
      cost = (value as { cost?: number }).cost
      if (cost !== undefined)
        wholeNumber(cost, 'cost', {
          min: 0,
          code: 'ERR_RATEWINDOW_INVALID_COST',
          allowed: 'a whole number >= 0 (returned by `rules`)',
        })
    }
    const signature = rules.map((rule) => `${rule.id}x${rule.limit}`).join('+')
    let limiter = this.#bySignature.get(signature)
    if (limiter === undefined) {
      if (this.#bySignature.size >= MAX_DYNAMIC_LIMITS) {
        const [oldest, dropped] = this.#bySignature.entries().next().value!
        this.#bySignature.delete(oldest)
        if (dropped !== this.#first) dropped.release()
      }
      limiter = this.#make(rules)
      this.#bySignature.set(signature, limiter)
      this.#first ??= limiter
    }
    const entry = { limiter, cost }
    if (typeof value === 'object' && value !== null) this.#resolved.set(value, entry)
    return entry
  }

  /** The limiter of a limit (a `limit` function's answer, checked here). */
  forLimit(limit: number): RateLimiter {
    let limiter = this.#limiters.get(limit)
    if (limiter === undefined) {
      wholeNumber(limit, 'limit', {
        min: 1,
        code: 'ERR_RATEWINDOW_INVALID_LIMIT',
        allowed: 'a positive whole number (returned by the `limit` function)',
      })
      if (this.#limiters.size >= MAX_DYNAMIC_LIMITS)
        this.#limiters.delete(this.#limiters.keys().next().value!)
      limiter = this.#make(this.#config.makeRule!(limit))
      this.#limiters.set(limit, limiter)
    }
    return limiter
  }

  /** A limiter of this middleware for `rules`, checked for `delay` when the middleware waits. */
  #make(rules: Rule | readonly Rule[]): RateLimiter {
    const limiter = new RateLimiter({ ...this.#config.limiter, rules }, this.#identity)
    if (this.#config.delay !== undefined) limiter.checkReservations('delay')
    return limiter
  }
}
