/**
 * Allocation per decision (issue 33): minor GCs (scavenges) per 100k decisions at a fixed young generation, and
 * the bytes allocated per decision, for each adapter on the memory path and on RedisStore.
 *
 * Method: each framework's bench server (http-server.ts) runs with its semi-space fixed at `SEMI_SPACE_MB`
 * (`--min-semi-space-size` = `--max-semi-space-size`, so that V8 does not grow it under load: one scavenge then
 * stands for a fixed amount of young allocation) and `--trace-gc-nvp`, whose line after each GC gives its kind
 * (`gc=s`: a scavenge) and the heap's growth since the previous GC (`allocated=`, its size before this GC less its
 * size after the last): both are counted from the server's output while the measured load runs, and divided by
 * the responses. (Node 20 has no `total_allocated_bytes` in `v8.getHeapStatistics()`.) The growth is the bytes
 * allocated as long as only scavenges run: it then agrees with the count, one scavenge ≈ one semi-space of
 * allocation less what survives it (the `≈ KB from GCs` column; what V8 puts straight in the old space counts
 * in the bytes only). Where major GCs run (`major GCs /100k`, the Redis path promotes what waits for a reply), the
 * old space's sweeping frees memory between two GCs and the growth is no longer only allocation: the scavenge
 * count is the measure, as issue 33 decided. Decisions are HTTP requests
 * from autocannon in another process (a fixed number per round, `REQUESTS`), so the load generator allocates
 * nothing here; the bare framework is
 * measured the same way, and `− bare` is our figure: the limiter's own allocation (and, on Redis, its client's),
 * with the framework's and Node's HTTP taken out.
 *
 * Before and after: `--before` (with BENCH_BEFORE, http.ts `buildOf`) adds `<variant>@before` for each variant,
 * its `− bare` taken against `bare@before`; the `after ÷ before` column is of the `− bare` scavenges.
 *
 *   pnpm --filter @ratewindow/bench allocation -- [--frameworks koa,hono] [--keys 1] [--rounds 3] [--requests 30000]
 *   [--variants ratewindow,ratewindow-redis] [--before]
 */
import type { ChildProcess } from 'node:child_process'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { load, type Server, startServer } from './http.js'
import { argument, median, table } from './stats.js'

/**
 * The fixed semi-space, MB (BENCH_SEMI_SPACE_MB to try another). At 1 MB, requests waiting for Redis outlived two
 * scavenges and were promoted on a loaded machine: major GCs ran (70 per 100k decisions in one run, 5 in the next
 * of the same build), and the Redis rows moved by 20 % between two runs of one build. At 8 MB none ran, and two
 * builds with the same request path measured 133 and 130 scavenges per 100k, 8.42 and 8.62 KB per decision.
 */
export const SEMI_SPACE_MB = Number(process.env.BENCH_SEMI_SPACE_MB ?? 8)
/**
 * Requests per round: a GC trace counts bytes when a GC happens, so a round is exact to one semi-space at each end
 * (±0.17 KB a decision over 50,000 at 8 MB, less as the two ends' errors offset), and the scavenge count to one.
 */
export const REQUESTS = 50_000
/** Requests of the warm-up round: the first requests run unoptimised code, which allocates more. */
const WARM_UP = 5_000
const GC_FLAGS = [
  `--min-semi-space-size=${SEMI_SPACE_MB}`,
  `--max-semi-space-size=${SEMI_SPACE_MB}`,
  '--trace-gc-nvp',
]

/** What a server's GC trace has said so far. */
export interface GcCount {
  scavenges: number
  /** Major GCs (mark-compact): while they run, `bytes` under-counts. */
  majors: number
  /** Bytes allocated, the sum of every GC's `allocated=`. */
  bytes: number
}

/** Reads `--trace-gc-nvp` lines as they come; `count` is the running total. */
export class GcTrace {
  readonly count: GcCount = { scavenges: 0, majors: 0, bytes: 0 }
  #rest = ''

  /** Follows `child`'s output from now on. */
  static of(child: ChildProcess): GcTrace {
    const trace = new GcTrace()
    child.stdout!.on('data', (chunk: Buffer) => trace.read(chunk.toString()))
    return trace
  }

  read(text: string): void {
    const lines = (this.#rest + text).split('\n')
    this.#rest = lines.pop()!
    for (const line of lines) {
      const kind = / gc=(\w+) /.exec(line)?.[1]
      if (kind === undefined) continue
      if (kind === 's') this.count.scavenges++
      else this.count.majors++
      this.count.bytes += Number(/ allocated=(\d+)/.exec(line)?.[1] ?? 0)
    }
  }

  snapshot(): GcCount {
    return { ...this.count }
  }
}

export interface AllocationRow {
  framework: string
  keys: number
  variant: string
  /** Medians over the rounds, per decision (response). */
  scavengesPer100k: number
  majorsPer100k: number
  bytesPerDecision: number
  /** The same less the bare framework's (of the same build); undefined for bare itself. */
  ourScavengesPer100k: number | undefined
  ourBytesPerDecision: number | undefined
  /** Decisions per Redis script call (the mean group size), 0 without Redis. */
  perCall: number
  decisions: number
}

/** Waits until the server's output has gone quiet (the trace lines of the load have all arrived). */
async function settled(trace: GcTrace): Promise<void> {
  let last = -1
  while (last !== trace.count.bytes + trace.count.scavenges) {
    last = trace.count.bytes + trace.count.scavenges
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

export async function runAllocation(
  options: {
    frameworks?: string[]
    variants?: string[]
    keys?: number[]
    rounds?: number
    /** Requests per round and server: a fixed number, so that the figures' precision does not depend on speed. */
    requests?: number
    before?: boolean
  } = {},
): Promise<AllocationRow[]> {
  const rounds = options.rounds ?? 3
  const requests = options.requests ?? REQUESTS
  const variants = options.variants ?? ['ratewindow', 'ratewindow-redis']
  const builds = options.before ? ['', '@before'] : ['']
  const redis = await RedisServer.start()
  const redisUrl = `redis://127.0.0.1:${redis.port}`
  const info = new Redis(redisUrl)
  const rows: AllocationRow[] = []
  try {
    for (const framework of options.frameworks ?? ['express', 'koa', 'fastify', 'hono'])
      for (const keys of options.keys ?? [1, 10_000]) {
        const configs = builds.flatMap((build) => ['bare', ...variants].map((variant) => variant + build))
        const servers = new Map<string, { server: Server; trace: GcTrace }>()
        try {
          for (const config of configs) {
            const server = await startServer(framework, config, 'allowed', redisUrl, undefined, GC_FLAGS)
            servers.set(config, { server, trace: GcTrace.of(server.child) })
          }
          const samples = new Map<
            string,
            { scavenges: number; majors: number; bytes: number; perCall: number; n: number }[]
          >(configs.map((config) => [config, []]))
          for (let round = -1; round < rounds; round++) {
            for (const config of configs) {
              const { server, trace } = servers.get(config)!
              // Round -1 warms up.
              await settled(trace)
              const start = trace.snapshot()
              const measured = await load(
                [server],
                keys,
                { requests: round < 0 ? WARM_UP : requests },
                50,
                info,
              )
              await settled(trace)
              if (round < 0) continue
              const n = measured.responses
              samples.get(config)!.push({
                scavenges: ((trace.count.scavenges - start.scavenges) * 100_000) / n,
                majors: ((trace.count.majors - start.majors) * 100_000) / n,
                bytes: (trace.count.bytes - start.bytes) / n,
                perCall: measured.perCall,
                n,
              })
            }
          }
          const of = (config: string, field: 'scavenges' | 'majors' | 'bytes' | 'perCall' | 'n') =>
            median(samples.get(config)!.map((sample) => sample[field]))
          for (const config of configs) {
            const bare = config.endsWith('@before') ? 'bare@before' : 'bare'
            rows.push({
              framework,
              keys,
              variant: config,
              scavengesPer100k: of(config, 'scavenges'),
              majorsPer100k: of(config, 'majors'),
              bytesPerDecision: of(config, 'bytes'),
              ourScavengesPer100k:
                config === bare ? undefined : of(config, 'scavenges') - of(bare, 'scavenges'),
              ourBytesPerDecision: config === bare ? undefined : of(config, 'bytes') - of(bare, 'bytes'),
              perCall: of(config, 'perCall'),
              decisions: of(config, 'n'),
            })
          }
        } finally {
          for (const { server } of servers.values()) server.child.kill()
        }
        console.error(`allocation: ${framework} ${keys} key(s) done`)
      }
  } finally {
    info.disconnect()
    await redis.stop()
  }
  return rows
}

const kb = (bytes: number) => (bytes / 1024).toFixed(2)

export function allocationTable(rows: readonly AllocationRow[]): string {
  const before = (row: AllocationRow) =>
    rows.find(
      (other) =>
        other.framework === row.framework &&
        other.keys === row.keys &&
        other.variant === `${row.variant}@before`,
    )
  const hasBefore = rows.some((row) => row.variant.endsWith('@before'))
  return table(
    [
      'framework',
      'keys',
      'configuration',
      'minor GCs /100k',
      'minor GCs /100k − bare',
      ...(hasBefore ? ['after ÷ before (− bare)'] : []),
      'major GCs /100k',
      'KB/decision',
      'KB/decision − bare',
      '≈ KB from GCs',
      'req per script call',
    ],
    rows.map((row) => {
      const earlier = before(row)
      return [
        row.framework,
        String(row.keys),
        row.variant,
        row.scavengesPer100k.toFixed(0),
        row.ourScavengesPer100k === undefined ? '' : row.ourScavengesPer100k.toFixed(0),
        ...(hasBefore
          ? [
              earlier?.ourScavengesPer100k && row.ourScavengesPer100k !== undefined
                ? (row.ourScavengesPer100k / earlier.ourScavengesPer100k).toFixed(2)
                : '',
            ]
          : []),
        row.majorsPer100k.toFixed(1),
        kb(row.bytesPerDecision),
        row.ourBytesPerDecision === undefined ? '' : kb(row.ourBytesPerDecision),
        kb((row.scavengesPer100k * SEMI_SPACE_MB * 1024 * 1024) / 100_000),
        row.perCall === 0 ? '' : row.perCall.toFixed(1),
      ]
    }),
  )
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await runAllocation({
    frameworks: (argument('frameworks') ?? 'express,koa,fastify,hono').split(','),
    variants: argument('variants')?.split(','),
    keys: (argument('keys') ?? '1,10000').split(',').map(Number),
    rounds: Number(argument('rounds') ?? '3'),
    requests: Number(argument('requests') ?? REQUESTS),
    before: process.argv.includes('--before'),
  })
  console.log(allocationTable(rows))
}
