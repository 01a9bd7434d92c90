export { type PrometheusMetricsOptions, prometheusMetrics, STORE_DURATION_BUCKETS } from './metrics.js'
