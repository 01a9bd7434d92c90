/**
 * Shadow rules: which of a limiter's rules enforce and which only count and report (the limiter's `shadow`, or a
 * rule's own), and how a result shows them. Rules in shadow mode beside enforcing ones have counters of their own,
 * decided by a second store call; a limiter whose rules are all in shadow mode makes one call and lets every
 * request through.
 */
import type { Rule } from '../algorithms/types.js'
import type { RateLimitResult, RuleResult } from '../result.js'
import type { Awaitable, StoreRequest } from '../stores/types.js'

/** @internal The rules of one limiter, split by mode. */
export class ShadowRules {
  /** Every rule, in rule order. */
  readonly all: readonly Rule[]
  /** Rules that enforce (not in shadow mode); empty for a shadow limiter. */
  readonly enforcing: readonly Rule[]
  /** The rules in shadow mode when others enforce: decided by a store call of their own. */
  readonly beside: readonly Rule[]
  /** Whether every rule is in shadow mode (the limiter's `shadow`, or each rule's). */
  readonly allShadow: boolean

  constructor(rules: readonly Rule[], shadow: boolean) {
    this.all = rules
    const enforcing = shadow ? [] : rules.filter((rule) => !rule.shadow)
    this.allShadow = enforcing.length === 0
    this.enforcing = Object.freeze(enforcing)
    this.beside =
      this.allShadow || enforcing.length === rules.length
        ? []
        : Object.freeze(rules.filter((rule) => rule.shadow))
  }

  /** Whether shadow rules stand beside enforcing ones (two store calls per decision). */
  get mixed(): boolean {
    return this.beside.length > 0
  }

  /** The rule sets that have counters of their own in the store: two when shadow and enforcing rules mix. */
  ruleSets(): readonly (readonly Rule[])[] {
    return this.mixed ? [this.enforcing, this.beside] : [this.all]
  }

  /**
   * The rules a result charged, for giving it back: shadow rules next to enforcing ones counted the request only
   * when they admitted it.
   */
  ruleSetsCharged(result: Pick<RateLimitResult, 'shadow'>): readonly (readonly Rule[])[] {
    return this.mixed && result.shadow ? [this.enforcing] : this.ruleSets()
  }

  /**
   * A shadow limiter's shadow-limited request was refused by its rules, so nothing was charged: there is nothing
   * to give back (refund) or to settle either way.
   */
  chargedNothing(result: Pick<RateLimitResult, 'shadow'>): boolean {
    return this.allShadow && result.shadow === true
  }

  /**
   * The answer of a limiter whose rules are all in shadow mode: a denial lets the request through, marked
   * `shadow`. With `reserved`, a reserved slot is reported as enforcing would, but nothing waits for it.
   */
  letThrough(result: RateLimitResult, reserved: boolean): RateLimitResult {
    if (!this.allShadow) return result
    if (!result.allowed) return { ...result, allowed: true, retryAfter: 0, shadow: true }
    if (reserved && result.delay !== undefined) return { ...result, shadow: true }
    return result
  }

  /**
   * Shadow rules next to enforcing ones are decided by a second store call (`decide`), made only when the
   * enforcing rules admitted the request (a refused request counts nowhere, as with all rules together). Their
   * denial marks the result `shadow`; `rules` then lists every rule in rule order. A store failure of the shadow
   * call is reported to `onError` (by `decide`) and changes nothing.
   */
  async add(
    request: StoreRequest,
    enforced: RateLimitResult,
    decide: (request: StoreRequest) => Awaitable<RateLimitResult>,
  ): Promise<RateLimitResult> {
    if (!enforced.allowed || enforced.source === 'policy') return enforced
    // A penalty follows the enforcing rules only: shadow denials neither count towards it nor see its block.
    const { penalty: _, ...unpenalised } = request
    const shadow = await decide({ ...unpenalised, rules: this.beside })
    if (shadow.source === 'policy' || shadow.source === 'shed') return enforced
    let e = 0
    let h = 0
    const rules: RuleResult[] = this.all.map((rule) =>
      rule.shadow ? shadow.rules[h++]! : enforced.rules[e++]!,
    )
    return shadow.allowed ? { ...enforced, rules } : { ...enforced, rules, shadow: true }
  }
}
