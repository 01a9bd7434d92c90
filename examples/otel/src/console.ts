/**
 * OpenTelemetry metrics of a limiter, exported to the console: an Express app with one enforcing rule and one
 * rule in shadow mode takes a short burst of requests, then the metrics are printed once.
 * Run: pnpm --filter @ratewindow/example-otel start
 */
import type { AddressInfo } from 'node:net'
import { metrics } from '@opentelemetry/api'
import {
  AggregationTemporality,
  ConsoleMetricExporter,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics'
import { fixedWindow, rateLimit, slidingWindowCounter } from '@ratewindow/express'
import { rateLimitMetrics } from '@ratewindow/otel'
import express from 'express'

/** An exporter that keeps the metrics, for the test of this example. */
export function memoryExporter(): InMemoryMetricExporter {
  return new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
}

export async function run(exporter: PushMetricExporter = new ConsoleMetricExporter()): Promise<number[]> {
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 })
  const provider = new MeterProvider({ readers: [reader] })
  metrics.setGlobalMeterProvider(provider)

  const app = express()
  app.get(
    '/search',
    rateLimit({
      name: 'search',
      rules: [
        fixedWindow({ limit: 8, window: '1m', name: 'per-minute' }),
        // Being tried out: counted and reported as 'shadow-limited', never refused.
        slidingWindowCounter({ limit: 3, window: '10s', name: 'burst', shadow: true }),
      ],
      observer: rateLimitMetrics(),
    }),
    (_request, response) => {
      response.send('results')
    },
  )
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const { port } = server.address() as AddressInfo
  const statuses: number[] = []
  try {
    for (let i = 0; i < 10; i++) statuses.push((await fetch(`http://127.0.0.1:${port}/search`)).status)
  } finally {
    server.close()
  }
  await provider.forceFlush()
  await provider.shutdown()
  metrics.disable()
  return statuses
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run().then((statuses) => console.log('statuses:', statuses.join(' ')))
}
