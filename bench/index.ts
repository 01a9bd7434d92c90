/**
 * `pnpm bench`: every benchmark in one run on this machine, written to docs/benchmarks.md with SVG charts.
 * Figures, ratios and medians only: nothing here passes or fails on a wall clock.
 */
import { execFileSync } from 'node:child_process'
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
bare\` compares with the bare framework in the same rounds; \`ratio to floor\` with the floor named beside it:
\`floor-headers\` is the bare framework plus one hook that sets two headers the size of our draft-7 pair and
decides nothing, \`floor-redis\` adds one ioredis EVALSHA of a script that only INCRs a per-client key with a
TTL (no limiter that calls Redis once per request can beat it). \`Node µs/req\` is the server process's CPU time
(\`process.cpuUsage()\`, user + system) ÷ responses; \`Redis µs/req\` is redis-server's \`INFO cpu\` (used_cpu_sys +
used_cpu_user) delta ÷ responses. \`-x4\` rows run 4 server processes, each on its own port taking a quarter of the
50 connections: \`ratewindow-synced-x4\` is the synchronised local mode (\`SyncedStore\`, default 100 ms interval)
and its \`ratio to bare\` is to \`bare-x4\`, 4 bare processes in the same rounds. Peers are configured like ours (same limit, 1 minute
window, client IP key); ours send draft-7 headers (two, the size of the floors' pair), the peers draft-6 where they
offer it. \`-redis\` variants use one local redis-server
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
// The repository's formatter owns Markdown tables too: a fresh run must leave `pnpm lint` green.
execFileSync('pnpm', ['exec', 'biome', 'format', '--write', join(docs, 'benchmarks.md')], { stdio: 'ignore' })
console.log(markdown)

/** Issue 12's targets, each measured side by side in this run. */
function targets(rows: readonly HttpRow[]): string {
  const lines = ['| target | framework | keys | measured | met |', '| --- | --- | --- | --- | --- |']
  const yes = (met: boolean) => (met ? 'yes' : 'no')
  for (const framework of ['express', 'koa', 'fastify']) {
    for (const keys of [1, 10_000]) {
      const here = rows.filter(
        (row) => row.framework === framework && row.path === 'allowed' && row.keys === keys,
      )
      const peers = here.filter((row) => !/^(ratewindow|bare|floor-)/.test(row.config))
      const bestPeer = (redis: boolean) =>
        Math.max(...peers.filter((row) => row.config.endsWith('-redis') === redis).map((row) => row.rps))
      const floorRedis = here.find((row) => row.config === 'floor-redis')
      const memory = here.find((row) => row.config === 'ratewindow')
      if (memory?.floorRatio !== undefined) {
        lines.push(
          `| memory store ≥ 0.97 of the header floor | ${framework} | ${keys} | ${memory.floorRatio.toFixed(2)} | ${yes(memory.floorRatio >= 0.97)} |`,
          `| memory store ahead of every peer's memory store | ${framework} | ${keys} | ${Math.round(memory.rps)} req/s vs best peer ${Math.round(bestPeer(false))} | ${yes(memory.rps > bestPeer(false))} |`,
        )
      }
      const redis = here.find((row) => row.config === 'ratewindow-redis')
      if (redis?.floorRatio !== undefined && floorRedis) {
        const cpu = redis.redisUs / floorRedis.redisUs
        if (framework !== 'express')
          lines.push(
            `| RedisStore ≥ 0.95 of the one-round-trip floor | ${framework} | ${keys} | ${redis.floorRatio.toFixed(2)} | ${yes(redis.floorRatio >= 0.95)} |`,
          )
        lines.push(
          `| RedisStore: Redis CPU per decision ≤ 1.3 × the floor's | ${framework} | ${keys} | ${redis.redisUs.toFixed(1)} µs / ${floorRedis.redisUs.toFixed(1)} µs = ${cpu.toFixed(2)} × | ${yes(cpu <= 1.3)} |`,
          `| RedisStore ahead of every peer on Redis | ${framework} | ${keys} | ${Math.round(redis.rps)} req/s vs best peer ${Math.round(bestPeer(true))} | ${yes(redis.rps > bestPeer(true))} |`,
        )
      }
      const synced = here.find((row) => row.config === 'ratewindow-synced-x4')
      if (synced) {
        lines.push(
          `| SyncedStore, 4 processes, ≥ 0.85 of bare (4 bare processes) | ${framework} | ${keys} | ${synced.ratio.toFixed(2)} | ${yes(synced.ratio >= 0.85)} |`,
        )
      }
    }
  }
  return lines.join('\n')
}

function ratioChart(rows: readonly HttpRow[]): string {
  const shown = rows.filter(
    (row) => row.path === 'allowed' && row.keys === 1 && row.config !== 'bare' && row.config !== 'bare-x4',
  )
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
