import type {
  BreakerEvent,
  BreakerState,
  DecisionEvent,
  OverrideEvent,
  RateLimitObserver,
  StoreCallEvent,
} from '@ratewindow/core'
import {
  MetricLabels,
  namesOf,
  rejectUnknownOptions,
  requireObject,
  STORE_DURATION_BUCKETS,
} from '@ratewindow/core/support'
import { Counter, Gauge, Histogram, type Registry, register } from 'prom-client'
import { WaitingRequests } from './waiting.js'

export interface PrometheusMetricsOptions {
  /** Where the metrics are registered. @default prom-client's default registry (`register`) */
  registry?: Registry
  /**
   * Distinct values kept of each label filled from names and routes: limiter names, and per limiter its rule
   * names and its routes. Values beyond are counted as `other` (core's `MetricLabels`). @default 100
   */
  maxLabelValues?: number
}

const OPTIONS = namesOf<PrometheusMetricsOptions>({ registry: true, maxLabelValues: true })

const BREAKER_STATES: readonly BreakerState[] = ['closed', 'half-open', 'open']

/**
 * Prometheus metrics from a limiter's observer events, registered with `prom-client`. Pass the result as the
 * `observer` option of a `RateLimiter` or a middleware; one observer serves several limiters (their `name` tells
 * them apart), and a second call for the same registry returns the first call's observer (with its options).
 *
 * Metrics (all per process; labels in braces):
 * - `ratewindow_decisions_total` {limiter, rule, outcome, route, plan}: `route` is `''` when no framework gave one,
 *   `plan` `''` for a limiter without plans;
 * - `ratewindow_store_duration_seconds` (histogram) {limiter, store, operation}: each store call;
 * - `ratewindow_store_errors_total` {limiter, store, kind}: failed store calls (`timeout`, `key`, `scope`);
 * - `ratewindow_breaker_state` {limiter, store, state}: the circuit breakers (one per failure scope) in each state,
 *   among those that changed state in this process;
 * - `ratewindow_breaker_transitions_total` {limiter, store, from, to};
 * - `ratewindow_waiting_requests` (gauge) {limiter}: requests admitted with a delay (`delay`, `wait()`) whose slot
 *   has not come yet;
 * - `ratewindow_near_limit_total` {limiter, rule}: admitted decisions that brought a key to the limiter's
 *   `nearLimit` share of a rule, once per key and rule window in this process;
 * - `ratewindow_override_decisions_total` {limiter, override}: decisions made under an override (`limits`) or
 *   refused by a manual block (`block`);
 * - `ratewindow_override_changes_total` {limiter, action}: override changes and manual actions made through this
 *   process (`set`, `delete`, `block`, `unblock`, `give`, `take`), not the fleet's.
 *
 * Client keys are never labels. Limiter names, and per limiter its rule names, routes and plans, are capped at
 * `maxLabelValues` distinct values each, then `other`.
 * @example
 * const limiter = rateLimit({ limit: 100, window: '1m', name: 'api', observer: prometheusMetrics() })
 */
export function prometheusMetrics(options: PrometheusMetricsOptions = {}): Required<RateLimitObserver> {
  rejectUnknownOptions(options, OPTIONS, 'prometheusMetrics()')
  if (options.registry !== undefined) requireObject(options.registry, 'registry', 'a prom-client Registry')
  const registry = options.registry ?? register
  const labels = new MetricLabels(options.maxLabelValues)
  const existing = observers.get(registry)
  // A registry cleared since (`registry.clear()`) no longer holds them: register them again.
  if (existing !== undefined && registry.getSingleMetric('ratewindow_decisions_total') !== undefined) {
    return existing
  }
  const observer = createObserver(registry, labels)
  observers.set(registry, observer)
  return observer
}

/** The observer made for each registry: its metrics can be registered only once. */
const observers = new WeakMap<Registry, Required<RateLimitObserver>>()

function createObserver(registry: Registry, labels: MetricLabels): Required<RateLimitObserver> {
  const registers = [registry]
  const counter = (name: string, help: string, labelNames: string[]) =>
    new Counter({ name, help, labelNames, registers })
  const waiting = new WaitingRequests()
  const breakers = new BreakerStates()
  new Gauge({
    name: 'ratewindow_waiting_requests',
    help: 'Requests admitted with a delay (delay, wait()) whose slot has not come yet, in this process.',
    labelNames: ['limiter'],
    registers,
    collect() {
      for (const [limiter, count] of waiting.count()) this.set({ limiter }, count)
    },
  })
  const decisions = counter(
    'ratewindow_decisions_total',
    'Rate limit decisions, by limiter, rule, outcome, route and plan.',
    ['limiter', 'rule', 'outcome', 'route', 'plan'],
  )
  const nearLimit = counter(
    'ratewindow_near_limit_total',
    'Admitted decisions that brought a key to the nearLimit share of a rule (once per key and window, per process).',
    ['limiter', 'rule'],
  )
  const overridden = counter(
    'ratewindow_override_decisions_total',
    'Decisions made under an override (limits) or refused by a manual block (block).',
    ['limiter', 'override'],
  )
  const overrideChanges = counter(
    'ratewindow_override_changes_total',
    'Override changes and manual actions made through this process.',
    ['limiter', 'action'],
  )
  const storeDuration = new Histogram({
    name: 'ratewindow_store_duration_seconds',
    help: 'Duration of the store calls made for rate limit decisions.',
    labelNames: ['limiter', 'store', 'operation'],
    buckets: [...STORE_DURATION_BUCKETS],
    registers,
  })
  const storeErrors = counter(
    'ratewindow_store_errors_total',
    'Failed store calls, by kind: timeout, key or scope.',
    ['limiter', 'store', 'kind'],
  )
  const breakerState = new Gauge({
    name: 'ratewindow_breaker_state',
    help: 'Circuit breakers (one per failure scope) in each state, among those that changed state in this process.',
    labelNames: ['limiter', 'store', 'state'],
    registers,
  })
  const transitions = counter('ratewindow_breaker_transitions_total', 'Circuit breaker state changes.', [
    'limiter',
    'store',
    'from',
    'to',
  ])
  return {
    onDecision(event: DecisionEvent): void {
      const limiter = labels.limiter(event.limiter)
      const route = event.route === undefined ? '' : labels.route(limiter, event.route)
      const plan = event.plan === undefined ? '' : labels.plan(limiter, event.plan)
      decisions.inc({ limiter, rule: labels.rule(limiter, event.rule), outcome: event.outcome, route, plan })
      if (event.nearLimit !== undefined)
        nearLimit.inc({ limiter, rule: labels.rule(limiter, event.nearLimit.rule) })
      if (event.override !== undefined) overridden.inc({ limiter, override: event.override })
      if (event.result.delay !== undefined && event.result.delay > 0) waiting.add(limiter, event.result.delay)
    },
    onStoreCall(event: StoreCallEvent): void {
      const limiter = labels.limiter(event.limiter)
      storeDuration.observe(
        { limiter, store: event.store, operation: event.operation },
        event.durationMs / 1000,
      )
      if (event.errorKind !== undefined)
        storeErrors.inc({ limiter, store: event.store, kind: event.errorKind })
    },
    onBreaker(event: BreakerEvent): void {
      const limiter = labels.limiter(event.limiter)
      transitions.inc({ limiter, store: event.store, from: event.from, to: event.to })
      const counts = breakers.change(`${limiter}\n${event.store}`, event.domain, event.to)
      for (const state of BREAKER_STATES)
        breakerState.set({ limiter, store: event.store, state }, counts[state])
    },
    onOverride(event: OverrideEvent): void {
      overrideChanges.inc({ limiter: labels.limiter(event.limiter), action: event.action })
    },
  }
}

/** The state of each breaker (limiter, store and scope) that changed state, and the count per state. */
class BreakerStates {
  readonly #states = new Map<string, Map<string | number, BreakerState>>()

  /** Records a change; answers how many of that limiter's and store's breakers are in each state. */
  change(id: string, scope: string | number, to: BreakerState): Record<BreakerState, number> {
    let scopes = this.#states.get(id)
    if (scopes === undefined) {
      scopes = new Map()
      this.#states.set(id, scopes)
    }
    scopes.set(scope, to)
    const counts: Record<BreakerState, number> = { closed: 0, 'half-open': 0, open: 0 }
    for (const state of scopes.values()) counts[state] += 1
    return counts
  }
}
