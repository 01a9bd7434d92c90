import type { ManualBlock } from '../algorithms/override.js'
import type { Rule } from '../algorithms/types.js'
import type { ConcurrencyResult } from '../limiter/concurrency.js'
import type { DecisionSource, RateLimitResult, RuleResult, SettleResult } from '../result.js'

/**
 * An admitted result of the HTTP engine, with `settle` (reserve-then-settle) on its prototype: no closure and no
 * property definition per request, and, being a prototype method, not serialised. Holds the same fields as the
 * limiter's result.
 * @internal
 */
export class SettleableResult implements RateLimitResult {
  declare allowed: boolean
  declare limit: number
  declare remaining: number
  declare reset: number
  declare retryAfter: number
  declare blocked?: number
  declare delay?: number
  declare key: string
  declare cost: number
  declare at: number
  declare rule: Rule
  declare rules: RuleResult[]
  declare source: DecisionSource
  declare shadow?: true
  declare overridden?: true
  declare manualBlock?: ManualBlock
  readonly #limiter: Settler
  /** Who rewrites unsent headers after a settle, on what response, with which concurrency slot. */
  #follower: SettleFollower | undefined
  #target: unknown
  #slot: ConcurrencyResult | undefined

  constructor(limiter: Settler, result: RateLimitResult) {
    this.#limiter = limiter
    this.allowed = result.allowed
    this.limit = result.limit
    this.remaining = result.remaining
    this.reset = result.reset
    this.retryAfter = result.retryAfter
    if (result.blocked !== undefined) this.blocked = result.blocked
    if (result.delay !== undefined) this.delay = result.delay
    this.key = result.key
    this.cost = result.cost
    this.at = result.at
    this.rule = result.rule
    this.rules = result.rules
    this.source = result.source
    if (result.shadow !== undefined) this.shadow = result.shadow
    if (result.overridden !== undefined) this.overridden = result.overridden
    if (result.manualBlock !== undefined) this.manualBlock = result.manualBlock
  }

  settle(actualCost: number): Promise<SettleResult> {
    const settled = this.#limiter.settle(this, actualCost)
    const follower = this.#follower
    if (follower === undefined) return settled
    return settled.then((outcome) => {
      if (outcome.charged > 0 || outcome.refunded > 0) follower.rewrite(this, this.#target, this.#slot)
      return outcome
    })
  }

  /** @internal After each settle that changed something, `follower` rewrites the headers of `target`. */
  follow(follower: SettleFollower, target: unknown, slot: ConcurrencyResult | undefined): void {
    this.#follower = follower
    this.#target = target
    this.#slot = slot
  }
}

interface SettleFollower {
  rewrite(result: RateLimitResult, target: unknown, slot: ConcurrencyResult | undefined): void
}

interface Settler {
  settle(result: RateLimitResult, actualCost: number): Promise<SettleResult>
}
