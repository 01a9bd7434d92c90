import { type Attributes, metrics } from '@opentelemetry/api'
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import { fixedWindow, MemoryStore, RateLimiter, RedisStore } from '@ratewindow/core'
import { rateLimit } from '@ratewindow/express'
import express from 'express'
import { Redis } from 'ioredis'
import request from 'supertest'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { RedisServer } from '../../../test/support/redis-server.js'
import { GROUP_SIZE_BUCKETS, rateLimitMetrics, STORE_DURATION_BUCKETS } from '../src/index.js'

let exporter: InMemoryMetricExporter
let reader: PeriodicExportingMetricReader
let provider: MeterProvider

beforeEach(() => {
  exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  // A long interval: the test collects by forceFlush, never by time.
  reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
  provider = new MeterProvider({ readers: [reader] })
})
afterEach(async () => {
  await provider.shutdown()
  metrics.disable()
})

/** The data points of one instrument after a collection. */
async function points(name: string): Promise<DataPoint<unknown>[]> {
  await reader.forceFlush()
  const batches = exporter.getMetrics()
  const last = batches.at(-1)!
  const metric = last.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .find((each) => each.descriptor.name === name)
  return (metric?.dataPoints ?? []) as DataPoint<unknown>[]
}

const counts = (list: DataPoint<unknown>[]) =>
  list.map((point) => [point.attributes, point.value] as [Attributes, unknown])

describe('@ratewindow/otel', () => {
  it('counts near-limit signals by limiter and rule: once per key and window (issue 35)', async () => {
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 10, window: '1m', name: 'minute' }),
      name: 'login',
      observer: rateLimitMetrics({ meterProvider: provider }),
    })
    for (let i = 0; i < 10; i++) await limiter.limit('alice')
    for (let i = 0; i < 9; i++) await limiter.limit('bob')
    expect(counts(await points('ratewindow.near_limit'))).toEqual([
      [{ 'ratewindow.limiter': 'login', 'ratewindow.rule': 'minute' }, 2],
    ])
  })

  it('counts decisions by limiter, rule, outcome and source, and times store calls in seconds', async () => {
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m', name: 'minute' }),
      name: 'login',
      observer: rateLimitMetrics({ meterProvider: provider }),
    })
    for (let i = 0; i < 3; i++) await limiter.limit('alice')
    expect(counts(await points('ratewindow.decisions'))).toEqual([
      [
        {
          'ratewindow.limiter': 'login',
          'ratewindow.rule': 'minute',
          'ratewindow.outcome': 'allowed',
          'ratewindow.source': 'store',
        },
        2,
      ],
      [
        {
          'ratewindow.limiter': 'login',
          'ratewindow.rule': 'minute',
          'ratewindow.outcome': 'limited',
          'ratewindow.source': 'store',
        },
        1,
      ],
    ])
    const [latency] = await points('ratewindow.store.duration')
    expect(latency!.attributes).toEqual({
      'ratewindow.limiter': 'login',
      'ratewindow.store': 'store',
      'ratewindow.operation': 'consume',
    })
    const histogram = latency!.value as Histogram
    expect(histogram.count).toBe(3)
    expect(histogram.buckets.boundaries).toEqual(STORE_DURATION_BUCKETS)
    // Seconds, not milliseconds: a memory store answers far below one second.
    expect(histogram.max!).toBeLessThan(1)
  })

  it('with RedisStore: the wait for a group and the group size apart from the duration of the call', async () => {
    const server = await RedisServer.start()
    const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 0 })
    try {
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 100, window: '1m' }),
        store: new RedisStore({ client }),
        name: 'api',
        observer: rateLimitMetrics({ meterProvider: provider }),
      })
      await limiter.limit('warm-up')
      // The first is sent at once, alone; the 19 that arrive while it is in flight go together in one call.
      await Promise.all(Array.from({ length: 20 }, () => limiter.limit('carol')))
      const [sizes] = await points('ratewindow.store.group_size')
      const size = sizes!.value as Histogram
      expect(size.buckets.boundaries).toEqual(GROUP_SIZE_BUCKETS)
      expect([size.count, size.sum, size.min, size.max]).toEqual([21, 1 + 1 + 19 * 19, 1, 19])
      const [waits] = await points('ratewindow.store.wait')
      const wait = waits!.value as Histogram
      expect(wait.count).toBe(21)
      expect(wait.min).toBeLessThan(0.001) // sent at once: no wait
      expect(wait.max).toBeGreaterThan(0) // the 19 waited for the call ahead
      const [calls] = await points('ratewindow.store.duration')
      expect((calls!.value as Histogram).count).toBe(21)
    } finally {
      client.disconnect()
      await server.stop()
    }
  })

  it('counts store errors by kind and circuit breaker transitions', async () => {
    const failing = Object.assign(Object.create(new MemoryStore()) as MemoryStore, {
      consume: () => Promise.reject(new Error('connection lost')),
    })
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m' }),
      store: failing,
      name: 'api',
      onError: () => {},
      circuitBreaker: { failures: 2, cooldown: '1m' },
      observer: rateLimitMetrics({ meterProvider: provider }),
    })
    for (let i = 0; i < 3; i++) await limiter.limit('bob')
    expect(counts(await points('ratewindow.store.errors'))).toEqual([
      [{ 'ratewindow.limiter': 'api', 'ratewindow.store': 'store', 'error.type': 'scope' }, 2],
    ])
    expect(counts(await points('ratewindow.breaker.transitions'))).toEqual([
      [
        {
          'ratewindow.limiter': 'api',
          'ratewindow.store': 'store',
          'ratewindow.breaker.from': 'closed',
          'ratewindow.breaker.to': 'open',
        },
        1,
      ],
    ])
    const decisions = counts(await points('ratewindow.decisions'))
    expect(decisions.map(([attributes, value]) => [attributes['ratewindow.outcome'], value])).toEqual([
      ['failed-open', 3],
    ])
  })

  it('refuses unknown option names, as every ratewindow options object does', () => {
    expect(() => rateLimitMetrics({ meterprovider: provider } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option: 'meterprovider' }),
    )
  })

  it('counts penalty blocks apart from limited requests: outcome blocked', async () => {
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m', name: 'minute' }),
      penalty: { after: 1, within: '1m', block: '10m' },
      name: 'login',
      observer: rateLimitMetrics({ meterProvider: provider }),
    })
    for (let i = 0; i < 4; i++) await limiter.limit('mallory')
    const decisions = counts(await points('ratewindow.decisions'))
    expect(decisions.map(([attributes, value]) => [attributes['ratewindow.outcome'], value])).toEqual([
      ['allowed', 1],
      ['blocked', 3],
    ])
  })

  it('labels decisions with http.route through an adapter, and counts shadow-limited requests', async () => {
    const app = express()
    app.get(
      '/users/:id',
      rateLimit({
        limit: 1,
        window: '1m',
        name: 'users',
        shadow: true,
        observer: rateLimitMetrics({ meterProvider: provider }),
      }),
      (_request, response) => {
        response.send('ok')
      },
    )
    for (const id of [1, 2, 3]) expect((await request(app).get(`/users/${id}`)).status).toBe(200)
    const decisions = counts(await points('ratewindow.decisions'))
    expect(
      decisions.map(([attributes, value]) => [
        attributes['http.route'],
        attributes['ratewindow.outcome'],
        value,
      ]),
    ).toEqual([
      ['/users/:id', 'allowed', 1],
      ['/users/:id', 'shadow-limited', 2],
    ])
  })

  it('uses the global meter provider by default', async () => {
    metrics.setGlobalMeterProvider(provider)
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      name: 'global',
      observer: rateLimitMetrics(),
    })
    await limiter.limit('carol')
    const decisions = counts(await points('ratewindow.decisions'))
    expect(decisions).toHaveLength(1)
    expect(decisions[0]![0]['ratewindow.limiter']).toBe('global')
  })
})
