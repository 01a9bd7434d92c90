/**
 * OpenTelemetry metrics of a limiter, exported to the console once: the app (app.ts) takes ten requests, then
 * the metrics are printed. Run: pnpm --filter @ratewindow/example-otel once
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
import { createApp } from './app.js'

/** An exporter that keeps the metrics, for the test of this example. */
export function memoryExporter(): InMemoryMetricExporter {
  return new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
}

export async function run(exporter: PushMetricExporter = new ConsoleMetricExporter()): Promise<number[]> {
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 })
  const provider = new MeterProvider({ readers: [reader] })
  metrics.setGlobalMeterProvider(provider)

  const server = createApp().listen(0, '127.0.0.1')
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
