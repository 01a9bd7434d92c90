/**
 * Paired runs: issue 12's targets, each judged on two servers loaded at the same time.
 *
 * The HTTP matrix (http.ts) loads one configuration after another; on these small, shared machines the speed of
 * the whole machine drifts by 10–25 % from one run to the next, which is more than the margins the targets ask
 * about (0.97 of a floor). Here the two servers of a pair run at once, pinned to the same core, each loaded by its
 * own 25 connections from a load generator pinned to the other core: whatever slows the machine slows both in the
 * same seconds, and the core's time is shared fairly between the two processes, so the ratio of their req/s is the
 * inverse ratio of their cost per request. Each pair: one warm-up second, then `rounds` runs; the median ratio is
 * reported with its range, beside the `cost ratio` (CPU per request, the reference's ÷ ours). The `-x4` pair runs
 * 4 + 4 processes on all cores, 6 connections each, the load generator and redis-server among them: the figure
 * issue 12 asks for, and the noisiest here.
 *
 * Pairs, for each framework and for 1 and 10k client keys on the allowed path (`pairsOf`): ratewindow (memory)
 * against the header floor, `floor-key` and each peer's memory store (also with `headers: false` or our default
 * headers, `SAME_WORK`); RedisStore against the one-round-trip floor, the grouped floor and each peer's Redis
 * store; on Koa and Fastify, the synchronised mode (SyncedStore) against the bare framework,
 * in one process and in 4 against 4.
 *
 * Hono (`--frameworks hono`, not in the default list: `pnpm bench` runs it as a step of its own): the memory path on
 * `@hono/node-server` against the header floor and hono-rate-limiter.
 *
 * Run alone: pnpm --filter @ratewindow/bench pairs [-- --rounds 7 --duration 2 --frameworks fastify --keys 1]
 * Other pairs: `--pairs ratewindow:floor-key,floor-key:floor-headers`; `--aa`: each configuration against itself
 * (`selfPairs`), the noise. Before/after a change: `--pairs
 * ratewindow:ratewindow@before` with `BENCH_BEFORE=<root of the earlier checkout>` (see `buildOf` in http.ts).
 */
import { cpus } from 'node:os'
import { RedisServer } from '../test/support/redis-server.js'
import { load, pinTo, type Server, startServer, variantsOf } from './http.js'
import { MEMORY_ONLY, PEERS } from './peers.js'
import { argument, median, table } from './stats.js'

export interface PairRow {
  framework: string
  keys: number
  config: string
  reference: string
  /** Median over the rounds of req/s(config) ÷ req/s(reference), measured in the same seconds. */
  ratio: number
  low: number
  high: number
  /** Median over the rounds of the reference's Node CPU per response ÷ ours. */
  cost: number
  /** Median core time both servers used per second (one core: 1 is all of it); none for `-x4` pairs. */
  busy: number | undefined
  /** Median Node CPU per response, µs, of each side (all of a side's processes). */
  nodeUs: number
  referenceNodeUs: number
  /** Median req/s of each side. */
  rps: number
  referenceRps: number
}

/**
 * Our memory configuration doing the work a peer does on an allowed response (issue 33's ≥ 1.05× target): none
 * of its headers for rate-limiter-flexible (the bench's middleware sends none on allowed responses), our default
 * (draft-6, four headers) for express-rate-limit (draft-6 as peers.ts configures it), the draft-7 pair of the
 * bench's standing rows for the others (koa-ratelimit and @fastify/rate-limit send three X-RateLimit-* headers,
 * hono-rate-limiter the same draft-7 pair).
 */
export const SAME_WORK: Record<string, string> = {
  'rate-limiter-flexible': 'ratewindow-no-headers',
  'rate-limiter-flexible-req': 'ratewindow-no-headers',
  'express-rate-limit': 'ratewindow-default-headers',
  '@fastify/rate-limit': 'ratewindow',
  'koa-ratelimit': 'ratewindow',
  'hono-rate-limiter': 'ratewindow',
}

/**
 * The pairs of one framework: [configuration, reference]. Besides the targets' pairs, two that explain the
 * header floor: `floor-key` against `floor-headers` (what reading the client address and a fresh header value
 * cost, before any decision) and ratewindow against `floor-key` (what the decision costs); and on Redis, the
 * grouped floor against the per-request one (what grouping alone gives).
 */
export function pairsOf(framework: string): [string, string][] {
  const peers = PEERS[framework]!
  const memory: [string, string][] = [
    ['ratewindow', 'floor-headers'],
    ['floor-key', 'floor-headers'],
    ['ratewindow', 'floor-key'],
    // Issue 46: what the compiled pipeline saves over the general one, on one configuration.
    ['ratewindow', 'ratewindow-general'],
    ...peers.flatMap((peer) =>
      [...new Set(['ratewindow', SAME_WORK[peer]!, 'ratewindow-default-headers'])].map(
        (ours): [string, string] => [ours, peer],
      ),
    ),
  ]
  // Hono (issue 22): the memory path on @hono/node-server, against the header floor and hono-rate-limiter.
  if (framework === 'hono') return memory
  const synced: [string, string][] =
    framework === 'express'
      ? []
      : [
          ['ratewindow-synced', 'bare'],
          ['ratewindow-synced-x4', 'bare-x4'],
        ]
  return [
    ...memory,
    ['ratewindow-redis', 'floor-redis'],
    ['ratewindow-redis', 'floor-redis-grouped'],
    ['floor-redis-grouped', 'floor-redis'],
    ...peers
      .filter((peer) => !MEMORY_ONLY.has(peer))
      .map((peer): [string, string] => ['ratewindow-redis', `${peer}-redis`]),
    ...synced,
  ]
}

/**
 * The A/A pairs of a framework (issue 33): each configuration of its target pairs against itself, two servers of
 * the same build loaded at once; how far their ratios stray from 1 is the noise of a pair's median.
 */
export function selfPairs(framework: string): [string, string][] {
  const configurations = new Set(
    pairsOf(framework)
      .flat()
      .filter((config) => !config.endsWith('-x4')),
  )
  return [...configurations].map((config): [string, string] => [config, config])
}

/**
 * A pair's two measures, `req/s ratio` and `cost` (the reference's CPU per request ÷ ours): they agree when
 * the core is busy; when the load generator is the bottleneck (`busy` under 1) the req/s ratio is pulled towards
 * 1. A target counts as met only when both measures meet it.
 */
/**
 * Refuses, before anything starts, a pair naming a configuration one of the frameworks does not have (e.g.
 * `koa-ratelimit` on Fastify), or a framework there is no server for.
 */
export function checkPairs(frameworks: readonly string[], pairs: readonly [string, string][]): void {
  for (const framework of frameworks) {
    if (!(framework in PEERS))
      throw new Error(`pairs: no framework ${framework} (there are ${Object.keys(PEERS).join(', ')})`)
    const known = variantsOf(framework)
    for (const pair of pairs) {
      if (pair.length !== 2 || pair.some((side) => !side))
        throw new Error(`pairs: ${pair.join(':')} is not a pair (write configuration:reference)`)
      for (const side of pair)
        if (!known.includes(side.replace(/@before$/, '').replace(/-x4$/, '')))
          throw new Error(
            `pairs: ${framework} has no configuration ${side} (it has ${known.join(', ')}, each also as <name>-x4)`,
          )
    }
  }
}

export const worstRatio = (row: PairRow): number => Math.min(row.ratio, row.cost)

/** An A/A run's noise: the largest distance from 1 of its req/s and cost ratios (medians), and of a round's. */
export function noiseOf(rows: readonly PairRow[]): { median: number; round: number } {
  const from1 = (value: number) => Math.abs(value - 1)
  return {
    median: Math.max(0, ...rows.flatMap((row) => [from1(row.ratio), from1(row.cost)])),
    round: Math.max(0, ...rows.flatMap((row) => [from1(row.low), from1(row.high)])),
  }
}

export async function runPairs(
  options: {
    rounds?: number
    duration?: number
    frameworks?: string[]
    keys?: number[]
    /** Pairs to run instead of `pairsOf(framework)`, e.g. `[['ratewindow', 'floor-key']]`. */
    pairs?: [string, string][]
  } = {},
): Promise<{ rows: PairRow[]; pinned: boolean }> {
  const rounds = options.rounds ?? 7
  const duration = options.duration ?? 2
  const frameworks = options.frameworks ?? ['express', 'koa', 'fastify']
  if (options.pairs) checkPairs(frameworks, options.pairs)
  const allCores = cpus()
    .map((_, i) => i)
    .join(',')
  // Two cores or more: the load generator (this process) on core 0, the paired servers on core 1. redis-server,
  // started after, inherits core 0: it stands for a Redis on another machine, and its work is not taken from the
  // servers' core.
  const pinned = cpus().length >= 2 && pinTo('0', process.pid)
  if (!pinned)
    console.error('pairs: taskset unavailable or refused: servers and load generator are not pinned')
  const redis = await RedisServer.start()
  const redisUrl = `redis://127.0.0.1:${redis.port}`
  const rows: PairRow[] = []
  try {
    for (const framework of frameworks) {
      for (const keys of options.keys ?? [1, 10_000]) {
        for (const [config, reference] of options.pairs ?? pairsOf(framework)) {
          const x4 = config.endsWith('-x4') || reference.endsWith('-x4')
          const started: Server[] = []
          const start = async (variant: string) => {
            const list: Server[] = []
            const processes = variant.endsWith('-x4') ? 4 : 1
            for (let i = 0; i < processes; i++) {
              const server = await startServer(
                framework,
                variant.replace(/-x4$/, ''),
                'allowed',
                redisUrl,
                pinned ? (x4 ? allCores : '1') : undefined,
              )
              started.push(server)
              list.push(server)
            }
            return list
          }
          try {
            const sides = [await start(config), await start(reference)]
            // 25 connections for a one-process side, 6 per process for a 4-process one.
            const measure = (seconds: number) =>
              Promise.all(
                sides.map((side) => load(side, keys, seconds, side.length > 1 ? 6 * side.length : 25)),
              )
            await measure(1)
            const samples: (Omit<PairRow, 'framework' | 'keys' | 'config' | 'reference' | 'low' | 'high'> & {
              busy: number
            })[] = []
            for (let round = 0; round < rounds; round++) {
              const [ours, theirs] = await measure(duration)
              samples.push({
                ratio: ours!.rps / theirs!.rps,
                cost: theirs!.nodeUs / ours!.nodeUs,
                nodeUs: ours!.nodeUs,
                referenceNodeUs: theirs!.nodeUs,
                rps: ours!.rps,
                referenceRps: theirs!.rps,
                busy: (ours!.rps * ours!.nodeUs + theirs!.rps * theirs!.nodeUs) / 1e6,
              })
            }
            const of = (field: keyof (typeof samples)[number]) =>
              median(samples.map((sample) => sample[field]))
            const ratios = samples.map((sample) => sample.ratio)
            rows.push({
              framework,
              keys,
              config,
              reference,
              ratio: median(ratios),
              low: Math.min(...ratios),
              high: Math.max(...ratios),
              cost: of('cost'),
              nodeUs: of('nodeUs'),
              referenceNodeUs: of('referenceNodeUs'),
              rps: of('rps'),
              referenceRps: of('referenceRps'),
              // On one core only: x4 servers run on all of them.
              busy: x4 ? undefined : of('busy'),
            })
          } finally {
            for (const { child } of started) child.kill()
          }
          console.error(`pairs: ${framework} ${keys} key(s) ${config} vs ${reference} done`)
        }
      }
    }
  } finally {
    await redis.stop()
    if (pinned) pinTo(allCores, process.pid)
  }
  return { rows, pinned }
}

export function pairsTable(rows: readonly PairRow[]): string {
  return table(
    [
      'framework',
      'keys',
      'configuration',
      'against',
      'req/s',
      'against req/s',
      'req/s ratio',
      'range',
      'cost ratio',
      'Node µs/req',
      'against µs/req',
      'busy',
    ],
    rows.map((row) => [
      row.framework,
      String(row.keys),
      row.config,
      row.reference,
      Math.round(row.rps).toLocaleString('en-US'),
      Math.round(row.referenceRps).toLocaleString('en-US'),
      row.ratio.toFixed(2),
      `${row.low.toFixed(2)}–${row.high.toFixed(2)}`,
      row.cost.toFixed(2),
      row.nodeUs.toFixed(1),
      row.referenceNodeUs.toFixed(1),
      row.busy === undefined ? '' : row.busy.toFixed(2),
    ]),
  )
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const frameworks = (argument('frameworks') ?? 'express,koa,fastify').split(',')
  const pairs = argument('pairs')
    ?.split(',')
    .map((pair) => pair.split(':') as [string, string])
  const aa = process.argv.includes('--aa')
  const options = {
    rounds: Number(argument('rounds') ?? '7'),
    duration: Number(argument('duration') ?? '2'),
    keys: (argument('keys') ?? '1,10000').split(',').map(Number),
  }
  // A/A pairs differ per framework: one run per framework.
  const rows: PairRow[] = []
  for (const framework of aa ? frameworks : [frameworks.join(',')])
    rows.push(
      ...(
        await runPairs({
          ...options,
          frameworks: framework.split(','),
          pairs: aa ? (pairs ?? selfPairs(framework)) : pairs,
        })
      ).rows,
    )
  console.log(pairsTable(rows))
  if (aa) {
    const noise = noiseOf(rows)
    console.log(
      `\nA/A noise: medians within ±${(100 * noise.median).toFixed(1)} % of 1, single rounds within ±${(100 * noise.round).toFixed(1)} %`,
    )
  }
}
