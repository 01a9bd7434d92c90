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
  /** Whether an operator's override set that limit (a plan's limit is not an override). */
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
  /**
   * A `quota` rule's: when its current period ends (epoch ms, the store's clock), as the deciding process's calendar
   * places it; absent for the other algorithms.
   */
  periodEnd?: number
}

/** Where a key stands (`inspect`): read in one store call, changing nothing. */
export interface Inspection {
  key: string
  /** The store's time of the reading, epoch ms. */
  at: number
  /** Each rule, in rule order. */
  rules: InspectedRule[]
  /** With `plans`: the key's plan as the store recorded it (absent: none recorded yet, the first plan's rules). */
  plan?: string
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
      overridden: overrides(decision.override, request.rules[i]!.name),
      used: decision.outcomes[i]?.used ?? Math.max(0, each.rule.limit - each.remaining),
      remaining: decision.manualBlock === undefined ? each.remaining : 0,
      nextFree: each.remaining > 0 ? 0 : result.allowed ? (each.next ?? 0) : each.retryAfter,
      reset: each.reset,
      ...(each.rule.periods !== undefined && { periodEnd: each.rule.periods.at(decision.now).end }),
    })),
  }
  if (decision.plan !== undefined) inspection.plan = decision.plan
  if (decision.override !== undefined) inspection.override = decision.override
  if (decision.manualBlock !== undefined) inspection.block = decision.manualBlock
  else if (decision.blocked !== undefined) inspection.penaltyBlock = decision.blocked
  return inspection
}

/** Whether `override` sets the limit of the rule named `name` (its own entry, or a limit for every rule). */
function overrides(override: LimitOverride | undefined, name: string): boolean {
  if (override === undefined) return false
  return override.limit !== undefined || (override.rules !== undefined && Object.hasOwn(override.rules, name))
}

/** What `limiter.usage(key)` answers: where a key stands against each rule, for a billing page. */
export interface Usage {
  key: string
  /** The store's time of the reading, epoch ms. */
  at: number
  /** With `plans`: the key's plan as the store recorded it. */
  plan?: string
  /** Each rule, in rule order. */
  rules: RuleUsage[]
}

/** One rule of `Usage`. */
export interface RuleUsage {
  /** The rule's policy name (`quota({ name })`). */
  name: string
  /** The limit in force for the key (an override's, where one is). */
  limit: number
  /** Units counted now: more than `limit` while the key owes units (a settle's debt). */
  used: number
  /** Cost-1 requests that would pass now. */
  remaining: number
  /** When the whole limit is back if nothing else arrives, epoch ms (`at` when it already is). */
  resets: number
  /** A `quota` rule's: when its current period ends, epoch ms. */
  periodEnd?: number
}

/** `Usage` from an inspection: the figures a billing page shows, nothing of the operator's. */
export function usageOf(inspection: Inspection): Usage {
  return {
    key: inspection.key,
    at: inspection.at,
    ...(inspection.plan !== undefined && { plan: inspection.plan }),
    rules: inspection.rules.map(({ name, limit, used, remaining, reset, periodEnd }) => ({
      name,
      limit,
      used,
      remaining,
      resets: inspection.at + reset,
      ...(periodEnd !== undefined && { periodEnd }),
    })),
  }
}
