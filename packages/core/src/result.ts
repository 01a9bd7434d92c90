import type { ManualBlock } from './algorithms/override.js'
import type { Rule, RuleOutcome } from './algorithms/types.js'
import type { Decision, StoreRequest } from './stores/types.js'

/** One rule's part of a result. */
export interface RuleResult extends RuleOutcome {
  rule: Rule
  /** Whether this rule admits the request. */
  allowed: boolean
  /**
   * On an admitted request: the wait (ms) until a cost-1 request passes this rule, 0 while one still would.
   * What the reset headers announce for a rule with nothing left (see `rateLimitHeaders`).
   */
  next?: number
}

/** What `settle` did. */
export interface SettleResult {
  /**
   * Units charged on top of the estimate: all of them unless `maxDebt` bites (a rule taken past its limit owes the
   * excess until it has passed at its rate).
   */
  charged: number
  /** Units of the estimate given back (by the refund rules of each algorithm). */
  refunded: number
  /**
   * Units of the actual cost above the estimate that were not charged: 0 unless charging them would leave a rule
   * further past its limit than it may owe (`maxDebt`, at most what the rule carries: docs/policies.md), or the result
   * was refused, refunded, or its store failed.
   */
  uncharged: number
}

/** Where a decision came from. */
export type DecisionSource = 'store' | 'fallback' | 'policy' | 'cache' | 'deny-list' | 'shed'

/**
 * A truthful decision. Times are whole milliseconds. `limit`, `remaining` and `reset` describe the reported
 * rule: on a denial the one that blocks longest, otherwise the one with the fewest requests left.
 */
export interface RateLimitResult {
  allowed: boolean
  limit: number
  /** How many cost-1 requests would still pass now (across all rules). */
  remaining: number
  /**
   * Wait until the reported rule's whole quota is free again, if nothing else arrived. The reset headers announce
   * this while `remaining` is above 0; at 0 they announce when the next cost-1 request passes (see
   * `rateLimitHeaders` and `headerReset`).
   */
  reset: number
  /** Smallest wait after which the same request passes if nothing else arrives (0 when allowed). */
  retryAfter: number
  /**
   * With a `penalty`: how long (ms) the key stays blocked, when it is (this request's denial may have started
   * the block). `retryAfter` is at least this. Absent when the key is not blocked. In shadow mode, the block
   * enforcing would impose: the request passes, and `retryAfter` is 0.
   */
  blocked?: number
  /** The identifier that was limited. */
  key: string
  cost: number
  /**
   * Decision time in epoch ms, from the store's clock; for a reserved slot (`delay`), the slot's time. Pass it back
   * to `refund`.
   */
  at: number
  /**
   * Present when the request was over the limit and its slot was reserved (`delay`, `wait()`): it may go this many
   * ms after the decision (at `at`). The result is `allowed`, with `remaining` 0.
   */
  delay?: number
  /** The reported rule. */
  rule: Rule
  /** Every rule's outcome, in rule order. */
  rules: RuleResult[]
  source: DecisionSource
  /**
   * Present (true) when shadow mode let this request through although its rules would have limited it (the
   * limiter's or a rule's `shadow` option). `allowed` is then true; `rules` holds the outcomes as decided.
   */
  shadow?: true
  /**
   * HTTP adapters, on an admitted request: reports the request's actual cost once it is known (reserve-then-
   * settle, `RateLimiter.settle`): `req.rateLimit.settle(tokensUsed)`. Not serialised (non-enumerable).
   */
  settle?: (actualCost: number) => Promise<SettleResult>
  /**
   * Present (true) when an override of the key set the limits in force (`overrides: true`): `limit`, `rule` and
   * `rules` are those in force.
   */
  overridden?: true
  /**
   * Present when an operator blocked the key (`block`): the request was refused until `until` (store clock), with
   * `blocked` the rest of the block. `reason` is for the application and observers, never for the client.
   */
  manualBlock?: ManualBlock
}

/**
 * The failure policy's answer: the store could not decide. `limit` is the first rule's, `remaining` and
 * `reset` are unknown (reported as 0); adapters write no RateLimit headers for it.
 */
export function policyResult(request: StoreRequest, allowed: boolean, retryAfter: number): RateLimitResult {
  return unknownQuota(request, allowed, retryAfter, 'policy')
}

/**
 * The answer to a shed decision (too many were waiting for the store): limited, with `retryAfter` about one
 * round trip, and no store call made. `remaining` and `reset` are unknown, as for the failure policy.
 */
export function shedResult(request: StoreRequest, retryAfter: number): RateLimitResult {
  return unknownQuota(request, false, retryAfter, 'shed')
}

function unknownQuota(
  request: StoreRequest,
  allowed: boolean,
  retryAfter: number,
  source: 'policy' | 'shed',
): RateLimitResult {
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
    source,
  }
}

/** Builds the public result from a store decision. */
export function toResult(request: StoreRequest, decision: Decision, source: DecisionSource): RateLimitResult {
  const { key, cost } = request
  // Under an override: the rules in force.
  const rules = decision.rules ?? request.rules
  const { outcomes, allowed } = decision
  const results: RuleResult[] = new Array(outcomes.length)
  let reported = 0
  let remaining = Number.POSITIVE_INFINITY
  for (let i = 0; i < outcomes.length; i++) {
    const outcome = outcomes[i]!
    // An admitted decision's outcome `retryAfter` is the wait until a cost-1 request passes: `next`.
    results[i] = allowed
      ? {
          rule: rules[i]!,
          allowed,
          remaining: outcome.remaining,
          reset: outcome.reset,
          retryAfter: 0,
          next: outcome.retryAfter,
        }
      : {
          rule: rules[i]!,
          allowed: outcome.retryAfter === 0,
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
  const result: RateLimitResult = {
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
  const { blocked, wait } = decision
  if (decision.rules !== undefined) result.overridden = true
  if (decision.manualBlock !== undefined) result.manualBlock = decision.manualBlock
  if (wait !== undefined && wait > 0) {
    result.delay = wait
    result.at = decision.now + wait
    result.remaining = 0
  }
  if (blocked !== undefined && blocked > 0) {
    // Blocked: nothing passes until the block ends, whatever the rules would admit.
    result.blocked = blocked
    result.remaining = 0
    result.retryAfter = Math.max(result.retryAfter, blocked)
  }
  return result
}

/**
 * The result as the enforcing rules alone see it, for RateLimit headers: shadow rules are left out so that no
 * header announces a limit that is not enforced. Undefined when every rule is in shadow mode.
 */
export function enforcedView(result: RateLimitResult): RateLimitResult | undefined {
  // The usual case, no shadow rule: the result itself, without a filtered copy of its rules.
  if (!result.rules.some(isShadow)) return result
  const rules = result.rules.filter((outcome) => !isShadow(outcome))
  if (rules.length === 0) return undefined
  let reported = rules[0]!
  let remaining = Number.POSITIVE_INFINITY
  for (const outcome of rules) {
    remaining = Math.min(remaining, outcome.remaining)
    const worse = result.allowed
      ? outcome.remaining < reported.remaining ||
        (outcome.remaining === reported.remaining && outcome.reset > reported.reset)
      : outcome.retryAfter > reported.retryAfter
    if (worse) reported = outcome
  }
  return {
    ...result,
    limit: reported.rule.limit,
    remaining,
    reset: reported.reset,
    retryAfter: result.allowed ? 0 : reported.retryAfter,
    rule: reported.rule,
    rules,
  }
}

const isShadow = (outcome: RuleResult) => outcome.rule.shadow === true

/**
 * After a settle's charge, each rule's `reset` and `next` (when a cost-1 request passes) are those the store reported
 * after it (`outcomes`, in rule order, of a charge or a peek `since` ms after the decision), measured from the
 * decision (`at`) as every wait of the result is; the result's `reset` follows its reported rule. Outcomes of another
 * rule set (another length) change nothing.
 * @internal
 */
export function followCharge(
  result: Partial<Pick<RateLimitResult, 'reset' | 'rule' | 'rules'>>,
  outcomes: readonly RuleOutcome[],
  since: number,
): void {
  const rules = result.rules
  if (rules === undefined || rules.length !== outcomes.length) return
  for (let i = 0; i < rules.length; i++) {
    const { reset, retryAfter } = outcomes[i]!
    const rule = rules[i]!
    rule.reset = reset > 0 ? reset + since : 0
    rule.next = retryAfter > 0 ? retryAfter + since : 0
    if (rule.rule === result.rule) result.reset = rule.reset
  }
}

/**
 * After `settle`, `remaining` (the result's and each rule's) follows the units given back (`delta` > 0) or charged
 * (< 0): the decision's figures with the settled cost in place of the estimate.
 * @internal
 */
export function shiftRemaining(
  result: Partial<Pick<RateLimitResult, 'remaining' | 'rules' | 'limit'>>,
  delta: number,
): void {
  if (delta === 0 || typeof result.remaining !== 'number') return
  result.remaining = Math.min(result.limit ?? Number.POSITIVE_INFINITY, Math.max(0, result.remaining + delta))
  for (const rule of result.rules ?? [])
    rule.remaining = Math.min(rule.rule.limit, Math.max(0, rule.remaining + delta))
}
