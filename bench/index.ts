/**
 * `pnpm bench`: every benchmark in one run on this machine, written to docs/benchmarks.md with SVG charts.
 * Figures, ratios and medians only: nothing here passes or fails on a wall clock.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { join } from 'node:path'
import { runAccuracy } from './accuracy.js'
import { allocationTable, REQUESTS, runAllocation, SEMI_SPACE_MB } from './allocation.js'
import { runClients } from './clients.js'
import { runBeforeAfter, runCore } from './core.js'
import { runFlood } from './flood.js'
import { type HttpRow, httpTable, runHttp } from './http.js'
import { runNestPairs } from './nestjs.js'
import { runObserve } from './observe.js'
import { runOutage } from './outage.js'
import { noiseOf, type PairRow, pairsTable, runPairs, SAME_WORK, selfPairs } from './pairs.js'
import { PEERS } from './peers.js'
import { ceilingTable, profileReport, runCeilings, runProfiles } from './profile.js'
import { runGroupedCpu, runRedis } from './redis.js'
import { runClusterFlood, runRedisFlood } from './redis-flood.js'
import { runSyncAccuracy } from './sync-accuracy.js'
import { issue46Targets } from './targets.js'
import { runWaiting } from './waiting.js'

const docs = join(import.meta.dirname, '..', 'docs')
const quick = process.argv.includes('--quick')
const step = async <T>(name: string, run: () => Promise<T>): Promise<T> => {
  console.error(`bench: ${name}…`)
  return run()
}

const core = await step('core', runCore)
// Issue 46: with BENCH_BEFORE (a built checkout of the earlier build), its loop and ours interleaved.
const beforeRoot = process.env.BENCH_BEFORE
const coreBeforeAfter = beforeRoot
  ? await step('core before/after', () => runBeforeAfter(beforeRoot))
  : undefined
const observe = await step('observe', runObserve)
const redis = await step('redis', runRedis)
const groups = await step('redis groups', runGroupedCpu)
const clients = await step('clients', runClients)
const accuracy = await step('accuracy', () => runAccuracy(join(docs, 'accuracy.svg')))
const syncAccuracy = await step('sync accuracy', runSyncAccuracy)
const flood = await step('flood', runFlood)
const waiting = await step('waiting', runWaiting)
const outage = await step('outage', runOutage)
const redisFlood = await step('redis flood', runRedisFlood)
const clusterFlood = await step('cluster flood', runClusterFlood)
const http = await step('http', () => runHttp({ rounds: quick ? 1 : 3, duration: quick ? 1 : 4 }))
writeFileSync(join(docs, 'http-ratios.svg'), ratioChart(http))
// Issue 33: the targets' medians are of 7 rounds at least; the Redis CPU target from its own runs of 7.
const rounds = quick ? 1 : 7
const pairs = await step('pairs', () => runPairs({ rounds, duration: quick ? 1 : 2 }))
const honoPairs = await step('hono pairs', () =>
  runPairs({ frameworks: ['hono'], rounds, duration: quick ? 1 : 2 }),
)
const redisCpu = await step('redis cpu', () =>
  runHttp({
    rounds,
    duration: quick ? 1 : 2,
    cases: ['allowed:1', 'allowed:10000'],
    configs: ['ratewindow-redis', 'floor-redis-grouped'],
  }),
)
const aa: PairRow[] = []
for (const framework of ['express', 'koa', 'fastify', 'hono'])
  aa.push(
    ...(
      await step(`A/A ${framework}`, () =>
        // One client key: the noise of a pair is the machine's, not the key count's (and 10k would double the step).
        runPairs({
          frameworks: [framework],
          keys: [1],
          pairs: selfPairs(framework),
          rounds,
          duration: quick ? 1 : 2,
        }),
      )
    ).rows,
  )
const noise = noiseOf(aa)
const nest = await step('nestjs', () => runNestPairs({ rounds: quick ? 1 : 5, duration: quick ? 1 : 2 }))
// Issue 33: with BENCH_BEFORE (a built checkout of the earlier build), the profile and the allocation figures are
// before and after, from the same run.
const before = process.env.BENCH_BEFORE !== undefined
const allocation = await step('allocation', () =>
  runAllocation({ rounds: quick ? 1 : 3, requests: quick ? 5_000 : REQUESTS, before }),
)
const profiles = await step('profile', () =>
  runProfiles({
    frameworks: ['express', 'koa', 'fastify', 'hono'],
    variants: ['ratewindow-no-headers', 'ratewindow', 'ratewindow-redis'],
    keys: [1, 10_000],
    duration: quick ? 1 : 4,
    intervalUs: 250,
    before,
  }),
)
// Issue 46: each peer pair's ceiling, from ours and the peer profiled at once (5 runs, medians).
const ceilings = await step('ceilings', () =>
  runCeilings({
    frameworks: ['express', 'koa', 'fastify', 'hono'],
    pairs: (framework) => [
      ...new Map(
        (PEERS[framework] ?? []).flatMap((peer) =>
          [SAME_WORK[peer]!, 'ratewindow-default-headers'].map((ours): [string, [string, string]] => [
            `${ours} ${peer}`,
            [ours, peer],
          ]),
        ),
      ).values(),
    ],
    keys: [1, 10_000],
    runs: quick ? 1 : 5,
    duration: quick ? 1 : 3,
    intervalUs: 250,
  }),
)

const markdown = `# Benchmarks

Written by \`pnpm bench\` on ${new Date().toISOString().slice(0, 10)}: Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}.
These machines are small (2 cores) and noisy: every figure is a median, and every comparison is a ratio measured
side by side in the same run. The load generator (autocannon) shares the 2 cores with the server.

## Targets

Issue 46's targets (they replace issue 33's). The memory and Redis targets are judged on the paired runs below (two
servers loaded at the same time, so that the machine's drift cancels out), medians of ${rounds} rounds; a target
counts as met only when both of a pair's measures meet it, the req/s ratio and the cost ratio (CPU per request).
"Like for like": \`headers: false\` against rate-limiter-flexible, whose middleware sends no headers, and our
draft-7 pair against hono-rate-limiter's. Our units' share and the allocation are of this build against BENCH_BEFORE's
(${before ? 'set in this run' : '**not set in this run: those rows are not measured**'}), from the profiles and the allocation
runs below; the core loop interleaves the two builds in one process; Redis CPU per decision is of the scripts
RedisStore sends for groups of a fixed size (bench/redis.ts \`--groups\`).

${issue46Targets({
  pairs: [...pairs.rows, ...honoPairs.rows],
  profiles,
  allocation,
  core: coreBeforeAfter?.rows,
  groups: groups.rows,
  node: groups.node,
})}

### Ceilings

What a limiter costing nothing would reach against each peer: the peer's share of its server's CPU (its package
and the bench's middleware around it, bench/peers.ts) from ours and the peer profiled at once, ${quick ? 1 : 5} runs of
${quick ? 1 : 3} s, medians; the ceiling is 1 / (1 − that share). A pair's target above its ceiling cannot be met by any
limiter; our units' share beside it is what is left to take.

${ceilingTable(ceilings)}

### Redis CPU at fixed group sizes, and Node CPU per decision

${groups.text}

Per framework (reported), behind HTTP: RedisStore, the per-request floor (\`floor-redis\`) and the grouped floor
(\`floor-redis-grouped\`: the requests of one event-loop turn share one script call that INCRs each one's key)
loaded one after the other, ${rounds} rounds of ${quick ? 1 : 2} s, medians; the group sizes are what each framework's
turns gathered (\`req per script call\`).

${httpTable(redisCpu.filter((row) => row.config.includes('redis')))}

### Noise: each configuration against itself

The A/A run: each configuration of the pairs above paired with a second server of itself, the same way
(${rounds} rounds, one client key). Its medians are within ±${(100 * noise.median).toFixed(1)} % of 1 and its single rounds within
±${(100 * noise.round).toFixed(1)} %: a pair's ratio closer to a target than that is within the noise.

${pairsTable(aa)}

## Paired runs

The HTTP matrix below loads one configuration after another; on these machines the speed of the whole machine
drifts by 10–25 % between runs, more than the margins the targets ask about. Here the two servers of a pair run
at once, each loaded by its own connections (25; 6 per process in \`-x4\` pairs) from one load generator, so that
whatever slows the machine slows both in the same seconds. ${
  pairs.pinned
    ? `Both servers are pinned to core 1, the load generator and redis-server to core 0
(redis-server stands for a Redis on another machine): the core's`
    : 'This run could not pin processes to cores (no `taskset`): the machine’s'
} time is shared fairly between the two servers, so the ratio of their req/s is the inverse ratio of their
costs per request. Each pair:
one warm-up second, then ${rounds} runs of ${quick ? 1 : 2} s; \`req/s ratio\` is the median of the runs'
ratios with its range; \`cost ratio\` the median of the runs' ratios of CPU per response (the reference's ÷ ours);
\`busy\` the median core time both servers used per second (under 1: the load generator was the bottleneck, and the
req/s ratio is pulled towards 1). \`floor-key\` is the header floor that also reads the client address the
framework's way and formats the \`RateLimit\` value per request (a new string for Node to check each time): what
any IP-keyed limiter does besides deciding. \`ratewindow-synced\` is SyncedStore in one process against the bare
framework; in \`-x4\` pairs 4 + 4 server processes run on both cores, beside the load generator and redis-server
on core 0 (no \`busy\` figure there).

${pairsTable(pairs.rows)}

### Hono on Node (\`@hono/node-server\`)

The memory path of \`@ratewindow/hono\` (issue 22), paired the same way: ratewindow (\`rateLimit({ getConnInfo,
trustProxy: '127.0.0.1' })\`, draft-7 headers, the client from X-Forwarded-For through the loopback proxy)
against the header floor (bare Hono plus one middleware that sets the same two headers and decides nothing),
\`floor-key\` (the floor that also reads the client address, \`getConnInfo\` and the header, and formats the
\`RateLimit\` value per request), and hono-rate-limiter ${honoRateLimiterVersion()} (its memory store, the same two
draft-7 headers, keyed by the X-Forwarded-For header as it comes). Alone:
\`pnpm --filter @ratewindow/bench pairs -- --frameworks hono\`.

${pairsTable(honoPairs.rows)}

${nestSection(nest.rows)}

## HTTP: each framework bare, with ratewindow, and with its peers

autocannon on 127.0.0.1, 50 connections, ${quick ? 1 : 4} s per run, ${quick ? 1 : 3} rounds alternating between
configurations, medians. Each server runs in its own process; the packages are the built \`dist\`. \`ratio to
bare\` compares with the bare framework in the same rounds; \`ratio to floor\` with the floor named beside it:
\`floor-headers\` is the bare framework plus one hook that sets two headers the size of our draft-7 pair and
decides nothing, \`floor-redis\` adds one ioredis EVALSHA of a script that only INCRs a per-client key with a
TTL (no limiter that calls Redis once per request can beat it), \`floor-redis-grouped\` the same INCRs of one
event-loop turn's requests in one script call (what grouping can reach; its \`ratio to floor\` is to
\`floor-redis\`). \`Node µs/req\` is the server process's CPU time
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

## Allocation per decision

Issue 33: each framework's server (\`bench/http-server.ts\`, draft-7 headers, the allowed path) with its young
generation fixed at ${SEMI_SPACE_MB} MB a semi-space (\`--min-semi-space-size\` = \`--max-semi-space-size\`) and
\`--trace-gc-nvp\`, loaded by autocannon from another process (50 connections, ${(quick ? 5_000 : REQUESTS).toLocaleString('en-US')}
requests a round after 5,000 to warm up; medians of ${quick ? 1 : 3} rounds): minor GCs (scavenges) per 100,000 decisions, and the bytes allocated per
decision that the GC trace reports (\`allocated=\`, the heap's growth between two GCs; Node 20 has no
\`total_allocated_bytes\`). \`− bare\` takes the
bare framework's figure away (measured the same way, of the same build): what the limiter allocates, and on
RedisStore its Redis client. \`≈ KB from GCs\` is the scavenge count times the semi-space: close to the measured
bytes when no major GC runs (apart from what survives a scavenge, and what V8 puts straight in the old space).
With no major GC (\`major GCs /100k\` 0) the bytes are the finer figure (one scavenge is ${SEMI_SPACE_MB} MB); where
they run, the old space's sweeping frees memory between two GCs, the growth is no longer only allocation, and the
scavenge count is the measure. ${before ? '`@before` rows are the build in BENCH_BEFORE, `− bare` against its own bare server. ' : ''}Alone:
\`pnpm --filter @ratewindow/bench allocation\`.

${allocationTable(allocation)}

## Where the time goes: CPU profiles by unit

Issue 33: each framework's server under \`node --cpu-prof\` (250 µs between samples), loaded by autocannon for
${quick ? 1 : 4} s after a warm-up second (only the samples of those seconds count), self time grouped by our units;
\`µs/req\` is a unit's sampled time per response, \`share\` its part of the server's busy samples. The core's bundled
functions are placed by their source file through the dist's source map (the table \`UNITS\` in
\`bench/profile.ts\`); \`framework\` is every package under node_modules other than the Redis client, \`node/other\`
Node's own JavaScript and native work (HTTP parsing and writing, the event loop), \`gc\` the garbage collector,
\`bench\` the server's route. ${before ? 'Each variant ran at the same time as its `@before` (the build in BENCH_BEFORE), both on one core. ' : ''}Alone, with the functions behind each unit:
\`pnpm --filter @ratewindow/bench profile\` (\`--json\` for files and functions).

${profileReport(profiles, 0)}

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

## Waiting on one Redis key

\`limiter.wait()\` from several processes on one key (docs/waiting.md; \`pnpm --filter @ratewindow/bench waiting\`):
the slots the store reserved never exceed the limit in any window; the calls go at their slots plus the lateness.

${waiting}

## Floods of distinct keys (MemoryStore)

1,000,000 distinct keys; retained heap after a full GC; then every key expires and the background sweep (in
slices of 5,000, every 50 ms here) drops them while \`monitorEventLoopDelay\` watches the event loop.

${flood}

## A flood of concurrent decisions on Redis

One process, 10 ioredis connections (one RedisStore per connection), a limit of 1,000 per minute per key, default
options (timeout 250 ms, \`onStoreError: 'allow'\`); N \`limit()\` calls at once, on 1 key or spread over
10,000 keys, beside rate-limiter-flexible's RateLimiterRedis on the same connections
(\`pnpm --filter @ratewindow/bench redis-flood\`, [redis.md](redis.md#grouped-decisions)). \`policy answers\`
are decisions the failure policy made because a call failed or timed out: before grouping, 30,000 at once
admitted 19,373 this way. \`heap growth\` is the peak while the calls were being made.

${redisFlood}

## A flood on a Redis Cluster right after connecting

Issue 32: the same floods on a 3-master Cluster (started by the bench), each right after connecting: for each
client library with its default options, one new Cluster client per row (its groups see the whole flood), every
node without the scripts (\`SCRIPT FLUSH\`), a limit of 1,000 per minute per key (sliding window counter), default
limiter options (timeout 250 ms, \`onStoreError: 'allow'\`)
(\`pnpm --filter @ratewindow/bench redis-flood -- --cluster\`, [redis.md](redis.md#grouped-decisions)). Before issue
32 the same flood of 30,000 over 10,000 keys had 19,917 and 20,055 answers from the policy with ioredis (the two
masters it connects to at their first command), 0 to 19,917 with node-redis, 27,694 and 30,000 with GLIDE; 100,000
at once on one key with one client is past \`maxWaiting\` (50,000 waiting for one node): the rest is shed,
answered as limited without a store call, never admitted.

${clusterFlood}

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

/** The installed hono-rate-limiter's version, as the table names it. */
function honoRateLimiterVersion(): string {
  const manifest = join(import.meta.dirname, 'node_modules', 'hono-rate-limiter', 'package.json')
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version
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

/** Issue 23's pairs: Nest on Fastify, the guard of @ratewindow/nestjs against @nestjs/throttler (bench/nestjs.ts). */
function nestSection(rows: readonly PairRow[]): string {
  return `### Nest on Fastify: RateWindowModule against @nestjs/throttler

\`pnpm --filter @ratewindow/bench nestjs\` (bench/nestjs.ts): a Nest 12 app on \`@nestjs/platform-fastify\`, one
route, the limiter as the global guard on the allowed path: \`ratewindow\` is \`RateWindowModule.forRoot\` with its
MemoryStore, \`throttler\` is @nestjs/throttler 6 with its default storage, \`bare\` the app without a guard. Each
keeps its default headers (ours draft-6: four; the throttler's three). The same pairing as above: both servers
at once on core 1, the load generator on core 0, medians of the runs.

${pairsTable(rows)}`
}
