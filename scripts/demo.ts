/**
 * `pnpm demo`: starts the Express example on the memory store, drives real HTTP requests at it and prints
 * statuses and headers as they arrive, then compares the algorithms on simulated traffic. With `--chart [file]`
 * it also writes an SVG of admitted and limited requests over time per algorithm (default ratewindow-demo.svg).
 */
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { createApp } from '../examples/express/src/app.js'
import { chartSeries, chartSvg } from './chart.js'
import { runSimulation } from './simulation.js'

const SHOWN = ['ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after']

const server = createApp().listen(0, '127.0.0.1')
await once(server, 'listening')
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
console.log(
  `Express example on ${base} (memory store): 5 requests per 10 s per client, POST /login 3 per minute\n`,
)

async function show(method: string, path: string, client?: string): Promise<void> {
  // The example trusts a proxy on loopback, so X-Forwarded-For picks another client here.
  const response = await fetch(`${base}${path}`, {
    method,
    headers: client ? { 'X-Forwarded-For': client } : {},
  })
  const headers = SHOWN.filter((name) => response.headers.has(name))
    .map((name) => `${name}: ${response.headers.get(name)}`)
    .join('  ')
  const body = await response.text()
  console.log(
    `${method.padEnd(4)} ${path.padEnd(6)} ${(client ?? '127.0.0.1').padEnd(11)} → ${response.status}  ${headers}`,
  )
  if (response.status === 429) console.log(`${' '.repeat(27)}${body}`)
}

try {
  for (let i = 0; i < 6; i++) await show('GET', '/')
  console.log()
  for (let i = 0; i < 4; i++) await show('POST', '/login', '203.0.113.5')
} finally {
  server.close()
}

console.log('\n— The algorithms side by side (simulated clock, no waiting) —\n')
await runSimulation()

const chartAt = process.argv.indexOf('--chart')
if (chartAt !== -1) {
  const next = process.argv[chartAt + 1]
  const file = next !== undefined && !next.startsWith('-') ? next : 'ratewindow-demo.svg'
  const svg = chartSvg(
    await chartSeries(),
    'Admitted and limited requests per second: 10 per 10 s, a burst at 20 s, then 2/s from 30 s',
  )
  writeFileSync(file, svg)
  console.log(`\nChart written to ${file}`)
}
