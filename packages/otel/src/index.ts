import { type Attributes, type Meter, type MeterProvider, metrics } from '@opentelemetry/api'
import type {
  BreakerEvent,
  DecisionEvent,
  OverrideEvent,
  RateLimitObserver,
  StoreCallEvent,
} from '@ratewindow/core'
import { MetricLabels, namesOf, rejectUnknownOptions, STORE_DURATION_BUCKETS } from '@ratewindow/core/support'

/** `OTHER_LABEL_VALUE`: counted in place of the values beyond `maxLabelValues`; the buckets of store latency. */
export { OTHER_LABEL_VALUE, STORE_DURATION_BUCKETS } from '@ratewindow/core/support'

export interface RateLimitMetricsOptions {
  /** Where the instruments come from. @default the global meter provider (`metrics.getMeterProvider()`) */
  meterProvider?: MeterProvider
  /** Name of the meter. @default '@ratewindow/otel' */
  meterName?: string
  /**
   * Distinct values kept of each label this package fills from names and routes: limiter names, and per
   * limiter its rule names and its routes. Values beyond are counted as `other`, so that no traffic (a route
   * per tenant, a rule set per user) can flood your metrics backend. @default 100
   */
  maxLabelValues?: number
}

const OPTIONS = namesOf<RateLimitMetricsOptions>({
  meterProvider: true,
  meterName: true,
  maxLabelValues: true,
})

/** Bucket bounds for group sizes: a decision sent alone, then groups up to RedisStore's 1,000 per call. */
export const GROUP_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000]

/**
 * OpenTelemetry metrics from a limiter's observer events. Pass the result as the `observer` option of a
 * `RateLimiter` or a middleware; one instance may serve several limiters (their `name` tells them apart).
 *
 * Instruments:
 * - `ratewindow.decisions` (counter, `{request}`): `ratewindow.limiter`, `ratewindow.rule`,
 *   `ratewindow.outcome`, `ratewindow.source`, `http.route` when the framework knows it, and `ratewindow.plan` for
 *   a limiter with plans;
 * - `ratewindow.store.duration` (histogram, `s`): `ratewindow.limiter`, `ratewindow.store`,
 *   `ratewindow.operation`, and `error.type` for a failed call;
 * - `ratewindow.store.wait` (histogram, `s`, RedisStore only): time a decision waited for its group before its
 *   call was sent (0 when sent at once); `ratewindow.limiter`, `ratewindow.store`, `ratewindow.operation`;
 * - `ratewindow.store.group_size` (histogram, `{decision}`, RedisStore only): for each decision, how many
 *   decisions the Redis call that carried it decided (1: sent alone); the same attributes;
 * - `ratewindow.store.errors` (counter, `{error}`): `ratewindow.limiter`, `ratewindow.store`, `error.type`
 *   (`timeout`, `key` or `scope`);
 * - `ratewindow.near_limit` (counter, `{request}`): admitted decisions that brought a key to the limiter's
 *   `nearLimit` share of a rule, once per key and rule window in this process; `ratewindow.limiter`,
 *   `ratewindow.rule` (the rule near its limit);
 * - `ratewindow.breaker.transitions` (counter, `{transition}`): `ratewindow.limiter`, `ratewindow.store`,
 *   `ratewindow.breaker.from`, `ratewindow.breaker.to`.
 *
 * Client keys are never attributes (unbounded cardinality, personal data). Limiter names, and per limiter its
 * rule names and routes, are capped at `maxLabelValues` distinct values each (100), then `other`.
 * @example
 * const limiter = rateLimit({ limit: 100, window: '1m', name: 'api', observer: rateLimitMetrics() })
 */
export function rateLimitMetrics(options: RateLimitMetricsOptions = {}): Required<RateLimitObserver> {
  rejectUnknownOptions(options, OPTIONS, 'rateLimitMetrics()')
  const labels = new MetricLabels(options.maxLabelValues)
  const meter: Meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(
    options.meterName ?? '@ratewindow/otel',
  )
  const decisions = meter.createCounter('ratewindow.decisions', {
    description: 'Rate limit decisions, by limiter, rule, outcome and source.',
    unit: '{request}',
  })
  const storeDuration = meter.createHistogram('ratewindow.store.duration', {
    description: 'Duration of the store calls made for rate limit decisions.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...STORE_DURATION_BUCKETS] },
  })
  const storeWait = meter.createHistogram('ratewindow.store.wait', {
    description:
      'Time a decision waited for its group (behind a call in flight to its Redis node) before its call was sent.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...STORE_DURATION_BUCKETS] },
  })
  const groupSize = meter.createHistogram('ratewindow.store.group_size', {
    description: 'Decisions in the Redis call that carried each decision (1: sent alone).',
    unit: '{decision}',
    advice: { explicitBucketBoundaries: GROUP_SIZE_BUCKETS },
  })
  const storeErrors = meter.createCounter('ratewindow.store.errors', {
    description: 'Failed store calls, by kind: timeout, key (one key’s data) or scope (server or shard).',
    unit: '{error}',
  })
  const overrideActions = meter.createCounter('ratewindow.override.actions', {
    description: 'Override changes and manual actions (set, delete, block, unblock, give, take).',
    unit: '{action}',
  })
  const nearLimit = meter.createCounter('ratewindow.near_limit', {
    description:
      'Admitted decisions that brought a key to the limiter’s nearLimit share of a rule (once per key and window, per process).',
    unit: '{request}',
  })
  const transitions = meter.createCounter('ratewindow.breaker.transitions', {
    description: 'Circuit breaker state changes.',
    unit: '{transition}',
  })
  return {
    onDecision(event: DecisionEvent): void {
      const limiter = labels.limiter(event.limiter)
      const attributes: Attributes = {
        'ratewindow.limiter': limiter,
        'ratewindow.rule': labels.rule(limiter, event.rule),
        'ratewindow.outcome': event.outcome,
        'ratewindow.source': event.source,
      }
      if (event.route !== undefined) attributes['http.route'] = labels.route(limiter, event.route)
      if (event.override !== undefined) attributes['ratewindow.override'] = event.override
      if (event.plan !== undefined) attributes['ratewindow.plan'] = labels.plan(limiter, event.plan)
      decisions.add(1, attributes)
      if (event.nearLimit !== undefined) {
        nearLimit.add(1, {
          'ratewindow.limiter': limiter,
          'ratewindow.rule': labels.rule(limiter, event.nearLimit.rule),
        })
      }
    },
    onStoreCall(event: StoreCallEvent): void {
      const limiter = labels.limiter(event.limiter)
      const attributes: Attributes = {
        'ratewindow.limiter': limiter,
        'ratewindow.store': event.store,
        'ratewindow.operation': event.operation,
      }
      if (event.errorKind !== undefined) {
        attributes['error.type'] = event.errorKind
        storeErrors.add(1, {
          'ratewindow.limiter': limiter,
          'ratewindow.store': event.store,
          'error.type': event.errorKind,
        })
      }
      storeDuration.record(event.durationMs / 1000, attributes)
      if (event.waitedMs !== undefined) storeWait.record(event.waitedMs / 1000, attributes)
      if (event.groupSize !== undefined && event.groupSize > 0) groupSize.record(event.groupSize, attributes)
    },
    onBreaker(event: BreakerEvent): void {
      transitions.add(1, {
        'ratewindow.limiter': labels.limiter(event.limiter),
        'ratewindow.store': event.store,
        'ratewindow.breaker.from': event.from,
        'ratewindow.breaker.to': event.to,
      })
    },
    onOverride(event: OverrideEvent): void {
      overrideActions.add(1, {
        'ratewindow.limiter': labels.limiter(event.limiter),
        'ratewindow.override.action': event.action,
      })
    },
  }
}
