import type { Rule } from '../algorithms/types.js'
import type { DecisionEvent, NearLimit } from '../observe.js'
import type { RateLimitResult } from '../result.js'
import { invalid } from '../support/errors.js'

/** The defaults of `nearLimit`, in one place. */
export const NEAR_LIMIT_DEFAULTS = {
  /** Share of a rule's limit used at which a decision says so (Envoy's `near_limit` uses 80 %). */
  share: 0.8,
  /** Keys remembered as signalled, per limiter: beyond, the oldest signal is forgotten. */
  maxKeys: 10_000,
} as const

/** Whether a rule with `remaining` of `limit` left has used `share` of it (the near-limit signal, the warning field). */
export function reachedShare(limit: number, remaining: number, share: number): boolean {
  // NOTE: a tolerance, so that 0.7 of 10 is reached at 7 used despite binary fractions.
  return (limit - remaining) / limit >= share - 1e-9
}

/** Validates `nearLimit`: a share of the limit above 0 and at most 1, or `false`. */
export function parseNearLimit(value: unknown = NEAR_LIMIT_DEFAULTS.share): number | false {
  if (value === false) return false
  if (typeof value !== 'number' || !(value > 0 && value <= 1)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'nearLimit',
      value,
      'a share of the limit above 0 and at most 1 (0.8: 80 % used), or false',
    )
  }
  return value
}

/**
 * A limiter's decision callback: the observer's `onDecision` (guarded), its events marked with `nearLimit`. No
 * work at all without an observer: nothing is remembered, nothing computed.
 */
export function nearLimitObserver(
  onDecision: ((event: DecisionEvent) => void) | undefined,
  share: number | false,
  rules: readonly Rule[] = [],
): ((event: DecisionEvent) => void) | undefined {
  // A rule's own `warnAt` signals even where the limiter's `nearLimit` is off.
  if (onDecision === undefined || (share === false && !rules.some((rule) => rule.warnAt !== undefined)))
    return onDecision
  const signals = new NearLimitSignals(share)
  return (event) => {
    signals.mark(event)
    onDecision(event)
  }
}

/**
 * Says, on an admitted decision, that a key has used `share` of a rule's limit (the rule's own `warnAt`, else the
 * limiter's `nearLimit`): once per key and rule window (a quota's: its period) in this process. It remembers the end of the window it signalled for each key and rule (the decision's time plus
 * the rule's `reset`, on the store's clock), and signals again once a decision comes after it. At most `maxKeys`
 * are remembered: beyond, the oldest signal is forgotten, and that key may signal again in the same window.
 * NOTE: per process, by design (no write on the decision path): N processes deciding for one key may each send
 * one signal per window.
 */
export class NearLimitSignals {
  /** The limiter's `nearLimit`: the share of a rule without a `warnAt` of its own (false: none). */
  readonly #share: number | false
  readonly #maxKeys: number
  /** Key and rule name → end of the window signalled (store clock, epoch ms), oldest signal first. */
  readonly #signalled = new Map<string, number>()

  constructor(share: number | false, maxKeys: number = NEAR_LIMIT_DEFAULTS.maxKeys) {
    this.#share = share
    this.#maxKeys = maxKeys
  }

  /** Sets `event.nearLimit` when this admitted decision is the first near its limit in the window. */
  mark(event: DecisionEvent): void {
    if (event.outcome !== 'allowed') return
    const near = this.#check(event.result)
    if (near === undefined) return
    event.nearLimit = near[0]
    event.nearLimits = near
  }

  /** Every rule of `result` that reaches its share for the first time in its window, remembered; undefined: none. */
  #check(result: RateLimitResult): NearLimit[] | undefined {
    let near: NearLimit[] | undefined
    for (const outcome of result.rules) {
      const { limit, warnAt } = outcome.rule
      const share = warnAt ?? this.#share
      if (share === false || !reachedShare(limit, outcome.remaining, share)) continue
      const id = `${outcome.rule.name}\n${result.key}`
      const until = this.#signalled.get(id)
      if (until !== undefined && result.at < until) continue
      this.#remember(id, result.at + outcome.reset)
      near ??= []
      near.push({ rule: outcome.rule.name, limit, remaining: outcome.remaining })
    }
    return near
  }

  #remember(id: string, until: number): void {
    this.#signalled.delete(id)
    if (this.#signalled.size >= this.#maxKeys) {
      const oldest = this.#signalled.keys().next().value
      if (oldest !== undefined) this.#signalled.delete(oldest)
    }
    this.#signalled.set(id, until)
  }
}
