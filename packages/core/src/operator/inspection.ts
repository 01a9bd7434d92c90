/** Where a key stands, read by a peek (`inspect`, `inspectStored`, `top`): the shape every reading returns. */
import type { LimitOverride, ManualBlock } from '../algorithms/override.js'
import type { AlgorithmName } from '../algorithms/types.js'
import { toResult } from '../result.js'
import type { Decision, StoreRequest } from '../stores/types.js'

/** Where one rule of a key stands (`inspect`). */
export interface InspectedRule {
  /** The rule's policy name. */
  name: string
  algorithm: AlgorithmName
  /** The limit in force for this key (the burst for GCRA and the token bucket, as `result.limit`). */
  limit: number
  /** Whether an override set that limit. */
  overridden: boolean
  /**
   * Units the rule counts now, as its store keeps them: more than `limit` when the key owes units (a limit lowered
   * by an override leaves what was counted under the higher one; a settle's debt, up to the limiter's `maxDebt`).
   * A store that does not report it (a custom store) gives `limit` − `remaining`.
   */
  used: number
  /** Cost-1 requests that would pass now. */
  remaining: number
  /** Ms until the next unit frees (0 while one is free). */
  nextFree: number
  /** Ms until the whole quota is back, if nothing else arrives. */
  reset: number
}

/** Where a key stands (`inspect`): read in one store call, changing nothing. */
export interface Inspection {
  key: string
  /** The store's time of the reading, epoch ms. */
  at: number
  /** Each rule, in rule order. */
  rules: InspectedRule[]
  /** The key's override, when one is in force. */
  override?: LimitOverride
  /** The manual block, when the key is blocked by an operator. */
  block?: ManualBlock
  /** With a `penalty`: how long (ms) the penalty's block lasts, when the key is blocked by it. */
  penaltyBlock?: number
}

/** Where a key stands, from a peek of it (`inspect`, and `inspectStored` for a key known by its hash). */
export function inspectionOf(key: string, request: StoreRequest, decision: Decision): Inspection {
  const result = toResult(request, decision, 'store')
  const inspection: Inspection = {
    key,
    at: decision.now,
    rules: result.rules.map((each, i) => ({
      name: each.rule.name,
      algorithm: each.rule.algorithm,
      limit: each.rule.limit,
      overridden: each.rule !== request.rules[i],
      used: decision.outcomes[i]?.used ?? Math.max(0, each.rule.limit - each.remaining),
      remaining: decision.manualBlock === undefined ? each.remaining : 0,
      nextFree: each.remaining > 0 ? 0 : result.allowed ? (each.next ?? 0) : each.retryAfter,
      reset: each.reset,
    })),
  }
  if (decision.override !== undefined) inspection.override = decision.override
  if (decision.manualBlock !== undefined) inspection.block = decision.manualBlock
  else if (decision.blocked !== undefined) inspection.penaltyBlock = decision.blocked
  return inspection
}
