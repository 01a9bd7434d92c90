export { STORE_DURATION_BUCKETS } from '@ratewindow/core/support'
export { type PrometheusMetricsOptions, prometheusMetrics } from './metrics.js'
