import type { ManualBlock } from './algorithms/override.js'
import type { OutcomeRecord, Rule, RuleOutcome } from './algorithms/types.js'
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
   * Reports the request's actual cost once it is known (reserve-then-settle): `result.settle(tokensUsed)` is
   * `limiter.settle(result, tokensUsed)`, and in the HTTP adapters `req.rateLimit.settle(tokensUsed)`. Present on
   * the results of `limit` and `wait` that a limiter decided from its store or fallback; not on a peek's, nor on the
   * failure policy's. Not serialised (a method).
   */
  settle?: (actualCost: number) => Promise<SettleResult>
  /**
   * Present (true) when an override of the key set the limits in force (`overrides: true`): `limit`, `rule` and
   * `rules` are those in force.
   */
  overridden?: true
  /**
   * With `plans`: the plan that decided (the request's; for a peek without one, the plan the store recorded for the
   * key). `limit`, `rule` and `rules` are the plan's, under any override.
   */
  plan?: string
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

/** What settles a result (`RateLimitResult.settle`): the limiter that decided it. */
export interface Settler {
  settle(result: RateLimitResult, actualCost: number): Promise<SettleResult>
}

/** A `LimitResult`'s fields before `fillResult` writes them. */
const UNSET_RULE = undefined as unknown as Rule
const NO_RULES: RuleResult[] = []

/** Who rewrites a response's unsent headers after a settle (the HTTP engine's decision writer). */
export interface SettleFollower {
  rewrite(result: RateLimitResult, target: unknown, slot: unknown): void
}

/**
 * A limiter's result, built once per decision and settleable in place: `settle` is a method of its prototype (no
 * closure, no property defined per result, nothing serialised). Its own fields are `RateLimitResult`'s, in the
 * order every result has them.
 * @internal
 */
export class LimitResult implements RateLimitResult {
  declare allowed: boolean
  declare limit: number
  declare remaining: number
  declare reset: number
  declare retryAfter: number
  declare key: string
  declare cost: number
  declare at: number
  declare rule: Rule
  declare rules: RuleResult[]
  declare source: DecisionSource
  declare blocked?: number
  declare delay?: number
  declare shadow?: true
  declare overridden?: true
  declare plan?: string
  declare manualBlock?: ManualBlock
  readonly #settler: Settler
  /** Who rewrites unsent headers after a settle, on what response, with which in-flight slot (`follow`). */
  #follower: SettleFollower | undefined
  #target: unknown
  #slot: unknown

  constructor(settler: Settler) {
    this.#settler = settler
    // NOTE: every field is first written here, in order, so that V8 holds them all in the object itself; written
    // only by `fillResult`, they were kept apart in a property array grown (copied) three fields at a time.
    this.allowed = false
    this.limit = 0
    this.remaining = 0
    this.reset = 0
    this.retryAfter = 0
    this.key = ''
    this.cost = 0
    this.at = Number.NaN
    this.rule = UNSET_RULE
    this.rules = NO_RULES
    this.source = 'store'
  }

  /** A copy of `result` (a shadow mode's or a cache's, made as a plain object), settled through `settler`. */
  static of(settler: Settler, result: RateLimitResult): LimitResult {
    const copy = new LimitResult(settler)
    for (const name of Object.keys(result) as (keyof RateLimitResult)[])
      (copy as unknown as Record<string, unknown>)[name] = result[name]
    return copy
  }

  settle(actualCost: number): Promise<SettleResult> {
    const settled = this.#settler.settle(this, actualCost)
    const follower = this.#follower
    if (follower === undefined) return settled
    return settled.then((outcome) => {
      if (outcome.charged > 0 || outcome.refunded > 0) follower.rewrite(this, this.#target, this.#slot)
      return outcome
    })
  }

  /** @internal After each settle that changed something, `follower` rewrites the headers of `target`. */
  follow(follower: SettleFollower, target: unknown, slot: unknown): void {
    this.#follower = follower
    this.#target = target
    this.#slot = slot
  }
}

/** A decision's figures, by rule (`toResult` copies a `Decision`'s outcomes here: one builder reads both). */
const outcomeColumns: OutcomeRecord = { remaining: [], reset: [], retryAfter: [] }

/**
 * Fills `result` (a new `LimitResult`, or a plain object) from a decision's figures by rule: the public result,
 * built once. `rules` are those that decided (under an override, those in force).
 */
export function fillResult(
  result: RateLimitResult,
  key: string,
  cost: number,
  rules: readonly Rule[],
  allowed: boolean,
  now: number,
  figures: OutcomeRecord,
  source: DecisionSource,
): RateLimitResult {
  const count = rules.length
  const results: RuleResult[] = new Array(count)
  let reported = 0
  let remaining = Number.POSITIVE_INFINITY
  const { remaining: left, reset, retryAfter } = figures
  for (let i = 0; i < count; i++) {
    // An admitted decision's outcome `retryAfter` is the wait until a cost-1 request passes: `next`.
    results[i] = allowed
      ? {
          rule: rules[i]!,
          allowed,
          remaining: left[i]!,
          reset: reset[i]!,
          retryAfter: 0,
          next: retryAfter[i]!,
        }
      : {
          rule: rules[i]!,
          allowed: retryAfter[i] === 0,
          remaining: left[i]!,
          reset: reset[i]!,
          retryAfter: retryAfter[i]!,
        }
    remaining = Math.min(remaining, left[i]!)
    const worse = allowed
      ? left[i]! < left[reported]! || (left[i] === left[reported] && reset[i]! > reset[reported]!)
      : retryAfter[i]! > retryAfter[reported]!
    if (worse) reported = i
  }
  const rule = results[reported]!
  result.allowed = allowed
  result.limit = rule.rule.limit
  result.remaining = remaining
  result.reset = rule.reset
  result.retryAfter = allowed ? 0 : rule.retryAfter
  result.key = key
  result.cost = cost
  result.at = now
  result.rule = rule.rule
  result.rules = results
  result.source = source
  return result
}

/**
 * A reservation's wait and a penalty's block, added to a result `fillResult` built (the figures of a `Decision` or
 * a `DecisionRecord`, where 0 and absent both mean none).
 */
export function addWaits(
  result: RateLimitResult,
  now: number,
  wait: number | undefined,
  blocked: number | undefined,
): void {
  if (wait !== undefined && wait > 0) {
    result.delay = wait
    result.at = now + wait
    result.remaining = 0
  }
  if (blocked !== undefined && blocked > 0) {
    // Blocked: nothing passes until the block ends, whatever the rules would admit.
    result.blocked = blocked
    result.remaining = 0
    result.retryAfter = Math.max(result.retryAfter, blocked)
  }
}

/**
 * Builds the public result from a store decision: settleable through `settler` (the limiter's results), or a plain
 * object (an inspection's).
 */
export function toResult(
  request: StoreRequest,
  decision: Decision,
  source: DecisionSource,
  settler?: Settler,
): RateLimitResult {
  const { outcomes } = decision
  const figures = outcomeColumns
  for (let i = 0; i < outcomes.length; i++) {
    const outcome = outcomes[i]!
    figures.remaining[i] = outcome.remaining
    figures.reset[i] = outcome.reset
    figures.retryAfter[i] = outcome.retryAfter
  }
  // Under an override: the rules in force.
  const rules = decision.rules ?? request.rules
  const result = fillResult(
    settler === undefined ? ({} as RateLimitResult) : new LimitResult(settler),
    request.key,
    request.cost,
    outcomes.length === rules.length ? rules : rules.slice(0, outcomes.length),
    decision.allowed,
    decision.now,
    figures,
    source,
  )
  // Under a plan, the rules in force are the plan's: overridden only when an operator's override set them.
  if (decision.rules !== undefined && (decision.plan === undefined || decision.override !== undefined))
    result.overridden = true
  if (decision.plan !== undefined) result.plan = decision.plan
  if (decision.manualBlock !== undefined) result.manualBlock = decision.manualBlock
  addWaits(result, decision.now, decision.wait, decision.blocked)
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

/**
 * The `quota` rule that refused `result` (its period's allowance is used: docs/plans-and-quotas.md), the one that
 * blocks longest of several, when no rate rule blocks longer; else undefined
 * when no quota did (an admitted request, a rate refusal): an HTTP answer of its own (`quotaStatusCode`).
 */
export function refusingQuota(result: RateLimitResult): RuleResult | undefined {
  if (result.allowed) return undefined
  // Of several quotas that refuse (a day's and a month's), the one that blocks longest: its end is when to come back.
  let refusing: RuleResult | undefined
  for (const rule of result.rules)
    if (
      !rule.allowed &&
      rule.rule.algorithm === 'quota' &&
      (refusing === undefined || rule.retryAfter > refusing.retryAfter)
    )
      refusing = rule
  // A rate rule that blocks longer makes it a rate refusal: slowing down is what helps.
  return refusing !== undefined && refusing.retryAfter >= result.retryAfter ? refusing : undefined
}
