/** The example as a server on port 3000; its metrics are printed to the console every 10 s. */
import { metrics } from '@opentelemetry/api'
import {
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import { createApp } from './app.js'

const reader = new PeriodicExportingMetricReader({
  exporter: new ConsoleMetricExporter(),
  exportIntervalMillis: 10_000,
})
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }))

createApp().listen(3000, () => console.log('http://127.0.0.1:3000/search (metrics every 10 s)'))
