import { wholeNumber } from './validators.js'

/** The label value counted in place of the values beyond a cap (`MetricLabels`). */
export const OTHER_LABEL_VALUE = 'other'

/** The first `max` distinct values of one label; `other` for every value beyond. */
class CappedLabel {
  readonly #seen = new Set<string>()
  readonly #max: number

  constructor(max: number) {
    this.#max = max
  }

  value(value: string): string {
    if (this.#seen.has(value)) return value
    if (this.#seen.size >= this.#max) return OTHER_LABEL_VALUE
    this.#seen.add(value)
    return value
  }
}

/**
 * Bounded label values for the metrics of limiters (`@ratewindow/otel`, `@ratewindow/prometheus`): limiter names,
 * and per limiter its rule names, its routes and its plans, each capped at `maxValues` distinct values; values beyond are
 * counted as `other` (`OTHER_LABEL_VALUE`), so that no traffic (a route per tenant, a rule set per user) can flood
 * a metrics backend. Client keys never belong in a label. Memory: at most `maxValues` limiters, each with
 * `maxValues` rules and routes.
 * @example
 * const labels = new MetricLabels(100)
 * const limiter = labels.limiter(event.limiter)
 * const rule = labels.rule(limiter, event.rule)
 */
export class MetricLabels {
  readonly #limiters: CappedLabel
  readonly #perLimiter = new Map<string, { rules: CappedLabel; routes: CappedLabel; plans: CappedLabel }>()
  readonly #max: number

  /**
   * @param maxValues Distinct values kept of each label. @default 100
   * @param option The option's name in the error for a bad `maxValues`. @default 'maxLabelValues'
   */
  constructor(maxValues = 100, option = 'maxLabelValues') {
    wholeNumber(maxValues, option, { min: 1, allowed: 'a positive whole number such as 100' })
    this.#max = maxValues
    this.#limiters = new CappedLabel(maxValues)
  }

  /** The label of a limiter's name. */
  limiter(name: string): string {
    return this.#limiters.value(name)
  }

  /** The label of a rule's name, for the limiter label `limiter` (from `limiter()`). */
  rule(limiter: string, rule: string): string {
    return this.#of(limiter).rules.value(rule)
  }

  /** The label of a route pattern, for the limiter label `limiter` (from `limiter()`). */
  route(limiter: string, route: string): string {
    return this.#of(limiter).routes.value(route)
  }

  /** The label of a plan's name (`plans`), for the limiter label `limiter` (from `limiter()`). */
  plan(limiter: string, plan: string): string {
    return this.#of(limiter).plans.value(plan)
  }

  #of(limiter: string): { rules: CappedLabel; routes: CappedLabel; plans: CappedLabel } {
    let labels = this.#perLimiter.get(limiter)
    if (labels === undefined) {
      const max = this.#max
      labels = { rules: new CappedLabel(max), routes: new CappedLabel(max), plans: new CappedLabel(max) }
      this.#perLimiter.set(limiter, labels)
    }
    return labels
  }
}

/**
 * Bucket bounds (seconds) for the histograms of store latency, 0.1 ms to 1 s, where a limiter's store calls live:
 * one set for every metrics package (`@ratewindow/otel`, `@ratewindow/prometheus`).
 */
export const STORE_DURATION_BUCKETS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
]
