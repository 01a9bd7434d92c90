/** Programs of @ratewindow/core alone, with its metrics observers (otel, prometheus), and on Redis. */

import { loader, type ModuleSystem } from './load.js'

export const CORE_PROGRAM = `import {
  MemoryStore,
  RateLimiter,
  RateLimitError,
  type RateLimitResult,
  rateLimitHeaders,
  slidingWindowCounter,
  tokenBucket,
} from '@ratewindow/core'
import { type FrameworkBinding, HttpRateLimiter } from '@ratewindow/core/adapter'
import { type RemoteCall, remoteShardOf } from '@ratewindow/core/remote'
import { type StoredKey, storedHash } from '@ratewindow/core/stored'
import { invalid } from '@ratewindow/core/support'

const limiter = new RateLimiter({
  rules: [slidingWindowCounter({ limit: 10, window: '1s' }), tokenBucket({ capacity: 5, refillRate: 1 })],
  store: new MemoryStore(),
  prefix: 'api',
})

export async function decide(key: string): Promise<Record<string, string>> {
  const result: RateLimitResult = await limiter.limit(key, { cost: 1 })
  const remaining: number = result.remaining
  return { ...rateLimitHeaders(result, { format: 'draft-7' }), remaining: String(remaining) }
}

export function codeOf(error: unknown): string | undefined {
  return error instanceof RateLimitError ? error.code : undefined
}

// The kits: types and values through each entry point.
const binding: FrameworkBinding<{ ip: string }> = {
  name: 'kit',
  clientIp: (request) => request.ip,
  untrustedForwardedFor: () => undefined,
  trustProxyHint: '',
}
export const engine = new HttpRateLimiter({ limit: 1 }, binding)
export const release: RemoteCall = { op: 'release', prefix: 'rw', key: 'k', id: 'lease' }
export const shard: number = remoteShardOf({ prefix: 'rw', key: 'k' }, 4)
export const hashed = (stored: StoredKey) => storedHash(stored.key)
export const refused: RateLimitError = invalid('ERR_RATEWINDOW_INVALID_OPTION', 'limit', 0, 'a whole number')
`

/**
 * Core alone, as users load it, and one copy of core's code whatever the entry: core keeps module state and
 * `RateLimitError` is checked with `instanceof`, so an error made through a kit entry must be the root's, and the
 * MemoryStore a middleware makes by default must be the root's class.
 */
export function coreRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { MemoryStore, RateLimitError, RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { HttpRateLimiter, rateLimiterOptionsFrom } = ${load('@ratewindow/core/adapter')}
  const { invalid } = ${load('@ratewindow/core/support')}
  const { remoteShardOf } = ${load('@ratewindow/core/remote')}
  const { storedHash } = ${load('@ratewindow/core/stored')}
  const limiter = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }) })
  const allowed = []
  for (let i = 0; i < 3; i++) allowed.push((await limiter.limit('k')).allowed)
  if (allowed.join() !== 'true,true,false') throw new Error('allowed ' + allowed.join())
  if (!(invalid('ERR_RATEWINDOW_INVALID_OPTION', 'x', 1, 'text') instanceof RateLimitError))
    throw new Error('an error of @ratewindow/core/support is not the root RateLimitError')
  const binding = { name: 'check', clientIp: () => '203.0.113.9', untrustedForwardedFor: () => undefined, trustProxyHint: '' }
  let thrown
  try { new HttpRateLimiter({ limit: -1 }, binding) } catch (error) { thrown = error }
  if (!(thrown instanceof RateLimitError)) throw new Error('an error of @ratewindow/core/adapter is not the root RateLimitError: ' + thrown)
  if (!(rateLimiterOptionsFrom({ limit: 2, window: '1m' }).store instanceof MemoryStore))
    throw new Error("a middleware's default store is not the root MemoryStore")
  if (typeof remoteShardOf !== 'function' || typeof storedHash !== 'function') throw new Error('a kit entry is empty')
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** @ratewindow/otel beside core: the observer on a limiter, its options and its exported buckets. */
export const OTEL_PROGRAM = `import { metrics } from '@opentelemetry/api'
import { fixedWindow, RateLimiter } from '@ratewindow/core'
import { type RateLimitMetricsOptions, rateLimitMetrics, STORE_DURATION_BUCKETS } from '@ratewindow/otel'

const options: RateLimitMetricsOptions = { meterProvider: metrics.getMeterProvider(), meterName: 'app' }
export const limiter = new RateLimiter({
  rules: fixedWindow({ limit: 10, window: '1m' }),
  name: 'api',
  observer: rateLimitMetrics(options),
})
export const buckets: readonly number[] = STORE_DURATION_BUCKETS
`

/** Runtime check of @ratewindow/otel: three decisions, collected through the SDK, counted by outcome. */
export function otelRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { rateLimitMetrics } = ${load('@ratewindow/otel')}
  const { MeterProvider, MetricReader } = ${load('@opentelemetry/sdk-metrics')}
  class Reader extends MetricReader {
    async onForceFlush() {}
    async onShutdown() {}
  }
  const reader = new Reader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 2, window: '1m' }),
    name: 'api',
    observer: rateLimitMetrics({ meterProvider }),
  })
  for (let i = 0; i < 3; i++) await limiter.limit('k')
  const { resourceMetrics } = await reader.collect()
  const decisions = resourceMetrics.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .find((metric) => metric.descriptor.name === 'ratewindow.decisions')
  const counts = Object.fromEntries(
    (decisions?.dataPoints ?? []).map((point) => [point.attributes['ratewindow.outcome'], point.value]),
  )
  if (counts.allowed !== 2 || counts.limited !== 1) throw new Error('decisions ' + JSON.stringify(counts))
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** @ratewindow/prometheus beside core: the observer on a limiter, with the application's registry. */
export const PROMETHEUS_PROGRAM = `import { fixedWindow, RateLimiter } from '@ratewindow/core'
import { type PrometheusMetricsOptions, prometheusMetrics, STORE_DURATION_BUCKETS } from '@ratewindow/prometheus'
import { Registry } from 'prom-client'

const options: PrometheusMetricsOptions = { registry: new Registry(), maxLabelValues: 50 }
export const limiter = new RateLimiter({
  rules: fixedWindow({ limit: 10, window: '1m' }),
  name: 'api',
  observer: prometheusMetrics(options),
})
export const buckets: readonly number[] = STORE_DURATION_BUCKETS
`

/** Runtime check of @ratewindow/prometheus: three decisions, read back from the registry's exposition text. */
export function prometheusRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { prometheusMetrics } = ${load('@ratewindow/prometheus')}
  const { Registry } = ${load('prom-client')}
  const registry = new Registry()
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 2, window: '1m', name: 'minute' }),
    name: 'api',
    observer: prometheusMetrics({ registry }),
  })
  for (let i = 0; i < 3; i++) await limiter.limit('k')
  const text = await registry.metrics()
  for (const line of [
    'ratewindow_decisions_total{limiter="api",rule="minute",outcome="allowed",route="",plan=""} 2',
    'ratewindow_decisions_total{limiter="api",rule="minute",outcome="limited",route="",plan=""} 1',
  ]) {
    if (!text.includes(line)) throw new Error('missing ' + line + ' in\\n' + text)
  }
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/**
 * Overrides on Redis as users operate them (project redis-overrides), on a standalone server and on a 3-master
 * Cluster (their addresses in REDIS_PORT and CLUSTER_NODES): one limiter decides, another with its own client
 * (as in another process) raises the key's limit, blocks it and unblocks it, and each change is honoured at the
 * next decision; `list` finds the key.
 */
export const REDIS_OVERRIDES_RUN = `import { fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { Cluster, Redis } from 'ioredis'

async function operate(connect, label) {
  const clients = [connect(), connect()]
  try {
    const prefix = 'packed-' + Math.random().toString(36).slice(2, 8)
    const [api, desk] = clients.map(
      (client) =>
        new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), store: new RedisStore({ client }), prefix, name: 'api', overrides: true }),
    )
    const key = 'customer:42'
    const seen = []
    for (let i = 0; i < 3; i++) seen.push((await api.limit(key)).allowed)
    await desk.overrides.set(key, { limit: 4 }, { ttl: '1h' })
    const raised = await api.limit(key)
    seen.push(raised.allowed, raised.limit)
    await desk.overrides.block(key, { for: '1h', reason: 'ticket 5521' })
    const blocked = await api.limit(key)
    seen.push(blocked.allowed, blocked.manualBlock?.reason)
    await desk.overrides.unblock(key)
    seen.push((await api.limit(key)).allowed)
    // A page may hold fewer records than asked, or none (a Cluster's masters one after another): to the last page.
    const listed = []
    let cursor
    do {
      const page = await desk.overrides.list(cursor === undefined ? {} : { cursor })
      listed.push(...page.records.map((record) => record.key))
      cursor = page.cursor
    } while (cursor !== undefined)
    seen.push(listed.join())
    if (seen.join() !== 'true,true,false,true,4,false,ticket 5521,true,customer:42')
      throw new Error(label + ': ' + seen.join())
  } finally {
    for (const client of clients) client.disconnect()
  }
}

const nodes = JSON.parse(process.env.CLUSTER_NODES)
await operate(() => new Redis({ port: Number(process.env.REDIS_PORT), host: '127.0.0.1' }), 'standalone')
await operate(() => new Cluster(nodes), 'Cluster')
console.log('ok')
`
