/**
 * `pnpm bench`: every benchmark in one run on this machine, written to docs/benchmarks.md with SVG charts.
 * Figures, ratios and medians only: nothing here passes or fails on a wall clock.
 */
import { writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { join } from 'node:path'
import { runAccuracy } from './accuracy.js'
import { runClients } from './clients.js'
import { runCore } from './core.js'
import { runFlood } from './flood.js'
import { type HttpRow, httpTable, runHttp } from './http.js'
import { runObserve } from './observe.js'
import { runOutage } from './outage.js'
import { runRedis } from './redis.js'
import { runSyncAccuracy } from './sync-accuracy.js'

const docs = join(import.meta.dirname, '..', 'docs')
const quick = process.argv.includes('--quick')
const step = async <T>(name: string, run: () => Promise<T>): Promise<T> => {
  console.error(`bench: ${name}…`)
  return run()
}

const core = await step('core', runCore)
const observe = await step('observe', runObserve)
const redis = await step('redis', runRedis)
const clients = await step('clients', runClients)
const accuracy = await step('accuracy', () => runAccuracy(join(docs, 'accuracy.svg')))
const syncAccuracy = await step('sync accuracy', runSyncAccuracy)
const flood = await step('flood', runFlood)
const outage = await step('outage', runOutage)
const http = await step('http', () => runHttp({ rounds: quick ? 1 : 3, duration: quick ? 1 : 4 }))
writeFileSync(join(docs, 'http-ratios.svg'), ratioChart(http))

const markdown = `# Benchmarks

Written by \`pnpm bench\` on ${new Date().toISOString().slice(0, 10)}: Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}.
These machines are small (2 cores) and noisy: every figure is a median, and every comparison is a ratio measured
side by side in the same run. The load generator (autocannon) shares the 2 cores with the server.

## Targets

${targets(http)}

## HTTP: each framework bare, with ratewindow, and with its peers

autocannon on 127.0.0.1, 50 connections, ${quick ? 1 : 4} s per run, ${quick ? 1 : 3} rounds alternating between
configurations, medians. Each server runs in its own process; the packages are the built \`dist\`. \`ratio to
bare\` compares with the bare framework in the same rounds. Peers are configured like ours (same limit, 1 minute
window, client IP key, draft-6 headers where they offer them). \`-redis\` variants use one local redis-server
(ratewindow: RedisStore; express-rate-limit: rate-limit-redis; koa-ratelimit and @fastify/rate-limit: their
ioredis drivers; rate-limiter-flexible: RateLimiterRedis). \`ratewindow-redis-cached\` adds \`blockedCache: true\`;
\`ratewindow-redis-fixed\` runs the fixed window on RedisStore, the algorithm the peers' Redis stores use. Our
default (sliding window counter, server time) does more work in Redis per decision than a fixed window.

![req/s as a ratio to the bare framework](http-ratios.svg)

${httpTable(http)}

## Core decisions per second

${core}

## Observer hooks and shadow mode

${observe}

## Redis

${redis}

## Redis clients

${clients}

node-redis writes every command issued in the same tick in one batch (automatic pipelining, always on); ioredis
does so only with \`enableAutoPipelining\`. See [redis.md](redis.md#choosing-a-client) for the recommendation.

## Accuracy lab

![admitted requests per second around the boundary attack](accuracy.svg)

${accuracy}

## Accuracy the way Cloudflare measured it, and the synchronised mode

A trace like the one Cloudflare measured its sliding window counter on, replayed through the counter and the
synchronised mode (\`SyncedStore\`, docs/algorithms.md), then the synchronised mode with real processes on one
redis-server (\`bench/sync-accuracy.ts\`).

${syncAccuracy}

## Floods of distinct keys (MemoryStore)

1,000,000 distinct keys; retained heap after a full GC; then every key expires and the background sweep (in
slices of 5,000, every 50 ms here) drops them while \`monitorEventLoopDelay\` watches the event loop.

${flood}

## Redis going away

${outage}

The restart figure is bounded by the circuit breaker's cooldown (2 s by default): after 5 consecutive failures
the store is probed again once per cooldown.

## Profile-driven changes

See [profiling.md](profiling.md): what \`--cpu-prof\` showed, what changed, and before/after measured in one
process (\`bench/before-after.ts\`).
`
writeFileSync(join(docs, 'benchmarks.md'), markdown)
console.log(markdown)

function find(rows: readonly HttpRow[], framework: string, path: string, keys: number, config: string) {
  return rows.find(
    (row) => row.framework === framework && row.path === path && row.keys === keys && row.config === config,
  )
}

function targets(rows: readonly HttpRow[]): string {
  const lines = ['| target | framework | measured | met |', '| --- | --- | --- | --- |']
  for (const framework of ['express', 'koa', 'fastify']) {
    const memory = find(rows, framework, 'allowed', 1, 'ratewindow')
    const peers = rows.filter(
      (row) =>
        row.framework === framework &&
        row.path === 'allowed' &&
        row.keys === 1 &&
        !row.config.startsWith('ratewindow') &&
        row.config !== 'bare',
    )
    const bestPeer = (redis: boolean) =>
      Math.max(...peers.filter((row) => row.config.endsWith('-redis') === redis).map((row) => row.ratio))
    if (memory) {
      lines.push(
        `| memory store ≥ 0.95 of bare, allowed path | ${framework} | ${memory.ratio.toFixed(2)} | ${memory.ratio >= 0.95 ? 'yes' : 'no'} |`,
      )
      lines.push(
        `| memory store better than every peer (best peer ${bestPeer(false).toFixed(2)}) | ${framework} | ${memory.ratio.toFixed(2)} | ${memory.ratio > bestPeer(false) ? 'yes' : 'no'} |`,
      )
    }
    const redis = find(rows, framework, 'allowed', 1, 'ratewindow-redis')
    const goal = framework === 'express' ? 0.9 : 0.7
    if (redis) {
      lines.push(
        `| RedisStore ≥ ${goal} of bare | ${framework} | ${redis.ratio.toFixed(2)} | ${redis.ratio >= goal ? 'yes' : 'no'} |`,
      )
      lines.push(
        `| RedisStore better than every peer on Redis (best peer ${bestPeer(true).toFixed(2)}) | ${framework} | ${redis.ratio.toFixed(2)} | ${redis.ratio > bestPeer(true) ? 'yes' : 'no'} |`,
      )
    }
    const fixed = find(rows, framework, 'allowed', 1, 'ratewindow-redis-fixed')
    if (fixed) {
      lines.push(
        `| RedisStore with a fixed window, like the peers, better than every peer on Redis (best peer ${bestPeer(true).toFixed(2)}) | ${framework} | ${fixed.ratio.toFixed(2)} | ${fixed.ratio > bestPeer(true) ? 'yes' : 'no'} |`,
      )
    }
    const cached = find(rows, framework, 'denied', 1, 'ratewindow-redis-cached')
    const allowed = find(rows, framework, 'allowed', 1, 'ratewindow-redis')
    if (cached && allowed) {
      const ratio = cached.rps / allowed.rps
      lines.push(
        `| denied path with the blocked-key cache ≥ 0.95 of the allowed path (Redis) | ${framework} | ${ratio.toFixed(2)} | ${ratio >= 0.95 ? 'yes' : 'no'} |`,
      )
    }
  }
  return lines.join('\n')
}

function ratioChart(rows: readonly HttpRow[]): string {
  const shown = rows.filter((row) => row.path === 'allowed' && row.keys === 1 && row.config !== 'bare')
  const barHeight = 16
  const height = 40 + shown.length * (barHeight + 4)
  const x = (ratio: number) => 260 + Math.min(ratio, 1.5) * 300
  const bars = shown.map((row, i) => {
    const y = 30 + i * (barHeight + 4)
    const color = row.config.startsWith('ratewindow') ? '#1f77b4' : '#999999'
    return `<text x="5" y="${y + 12}" font-size="11">${row.framework} · ${row.config}</text><rect x="260" y="${y}" width="${(x(row.ratio) - 260).toFixed(1)}" height="${barHeight}" fill="${color}"/><text x="${(x(row.ratio) + 4).toFixed(1)}" y="${y + 12}" font-size="11">${row.ratio.toFixed(2)}</text>`
  })
  return `<svg xmlns="http://www.w3.org/2000/svg" width="760" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="5" y="16" font-size="13">Allowed path, one client: req/s as a ratio to the bare framework (1.0 = no overhead)</text>
<line x1="${x(1)}" y1="24" x2="${x(1)}" y2="${height - 5}" stroke="#d62728" stroke-dasharray="4 3"/>
${bars.join('\n')}
</svg>
`
}
