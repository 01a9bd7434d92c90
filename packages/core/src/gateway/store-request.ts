import type { Penalty } from '../algorithms/penalty.js'
import type { PlanSet } from '../algorithms/plans.js'
import { LOG_MAX_COST } from '../algorithms/sliding-window-log.js'
import type { Rule } from '../algorithms/types.js'
import type { StoreRequest, StoreTarget } from '../stores/types.js'
import { RateLimitError } from '../support/errors.js'
import { keyArgument, wellFormedKey, wholeNumber } from '../support/validators.js'

/** The rule of a `cost` argument, made once (not per request). */
const COST = { min: 0, code: 'ERR_RATEWINDOW_INVALID_COST' } as const

/** What a limiter's store requests are made of. */
export interface RequestBase {
  readonly namespace: string
  readonly rules: readonly Rule[]
  readonly maxCost: number
  readonly penalty: Penalty | undefined
  /** The limiter's plans, when it has them: its requests read the key's recorded plan unless given one. */
  readonly planSet?: PlanSet | undefined
}

/**
 * The store request of `key` (in its `wellFormedKey` form) for `cost` units, validated (a bad key or cost is a
 * programming error: it throws).
 * `capped`: a cost above the limiter's `maxCost` throws (a decision's); an operator's `give` and `take` are not
 * capped (each rule gives or takes as far as it can).
 */
export function storeRequest(
  limiter: RequestBase,
  overrides: string | undefined,
  key: string,
  cost: number,
  capped = true,
): StoreRequest {
  key = checkedKey(limiter, key, cost, capped)
  const { namespace: prefix, rules, penalty } = limiter
  const request: StoreRequest =
    penalty === undefined ? { prefix, key, rules, cost } : { prefix, key, rules, cost, penalty }
  if (overrides !== undefined) request.overrides = overrides
  if (limiter.planSet !== undefined) request.plan = limiter.planSet.recorded
  return request
}

/**
 * The `wellFormedKey` form of `key`, once `key` and `cost` are validated as `storeRequest` validates them (a bad key
 * or cost throws): for a caller that fills a request of its own.
 */
export function checkedKey(limiter: RequestBase, key: string, cost: number, capped = true): string {
  keyArgument(key)
  wholeNumber(cost, 'cost', COST)
  if (capped && cost > limiter.maxCost) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
      `\`cost\` ${cost} exceeds the largest cost the rules accept (${limiter.maxCost}: the smallest limit, and at most ${LOG_MAX_COST} for a sliding window log): such a request could never pass. Lower the cost or raise the limit.`,
      { option: 'cost' },
    )
  }
  return wellFormedKey(key)
}

/**
 * The target of a reset of `key` under `rules`, with the override scope when the limiter reads overrides: a store
 * may keep a key by it (DurableObjectStore routes an overrides limiter's keys by it), so a reset must say it too.
 */
export function resetTarget(
  limiter: Pick<RequestBase, 'namespace'>,
  overrides: string | undefined,
  key: string,
  rules: readonly Rule[],
): StoreTarget {
  const target: StoreTarget = { prefix: limiter.namespace, key: wellFormedKey(key), rules }
  if (overrides !== undefined) target.overrides = overrides
  return target
}
