/**
 * HTTP overhead: req/s and latency with autocannon on 127.0.0.1 for bare Express, Koa and Fastify, with
 * ratewindow (memory and Redis) and with their peers, on the allowed and the denied path, with one client key
 * and with 10k. Every configuration's server runs in its own process, started once; the rounds alternate
 * between them and the median is reported, as a ratio to the bare framework measured in the same rounds.
 *
 * Run alone: pnpm --filter @ratewindow/bench http [-- --rounds 3 --duration 3 --frameworks koa]
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import autocannon from 'autocannon'
import { RedisServer } from '../test/support/redis-server.js'
import { PEERS } from './peers.js'
import { median, table } from './stats.js'

const argument = (name: string, fallback: string) => {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? process.argv[index + 1]! : fallback
}

export interface HttpRow {
  framework: string
  path: string
  keys: number
  config: string
  rps: number
  ratio: number
  p50: number
  p99: number
}

/** The (path, keys) cases: the allowed path with one key and 10k keys, the denied path with one key. */
const CASES: [string, number][] = [
  ['allowed', 1],
  ['allowed', 10_000],
  ['denied', 1],
]

async function startServer(framework: string, variant: string, path: string, redisUrl: string) {
  const flags = process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? []
  // Without the source condition the packages resolve to their built dist, as users get them.
  const child: ChildProcess = spawn(
    process.execPath,
    [...flags, '--import', 'tsx', 'http-server.ts', framework, variant, path],
    {
      cwd: import.meta.dirname,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, REDIS_URL: redisUrl },
    },
  )
  const [line] = (await once(child.stdout!, 'data')) as [Buffer]
  return { port: JSON.parse(line.toString()).port as number, child }
}

async function load(port: number, keys: number, seconds: number) {
  let next = 0
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/`,
    connections: 50,
    duration: seconds,
    requests: [
      {
        setupRequest: (request) => {
          const client = next++ % keys
          const address = `10.${(client >> 16) & 255}.${(client >> 8) & 255}.${client & 255}`
          return { ...request, headers: { ...request.headers, 'x-forwarded-for': address } }
        },
      },
    ],
  })
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
  }
}

export async function runHttp(
  options: { rounds?: number; duration?: number; frameworks?: string[] } = {},
): Promise<HttpRow[]> {
  const rounds = options.rounds ?? 3
  const duration = options.duration ?? 3
  const redis = await RedisServer.start()
  const redisUrl = `redis://127.0.0.1:${redis.port}`
  const rows: HttpRow[] = []
  try {
    for (const framework of options.frameworks ?? ['express', 'koa', 'fastify']) {
      const peers = PEERS[framework]!
      for (const [path, keys] of CASES) {
        const configs = [
          'bare',
          'ratewindow',
          'ratewindow-redis',
          ...(path === 'denied' ? ['ratewindow-redis-cached'] : []),
          // The peers' Redis stores are fixed windows: the same algorithm on our store, for a like-for-like row.
          ...(path === 'allowed' && keys === 1 ? ['ratewindow-redis-fixed'] : []),
          ...peers,
          ...peers.map((peer) => `${peer}-redis`),
        ]
        const servers = new Map<string, { port: number; child: ChildProcess }>()
        for (const config of configs)
          servers.set(config, await startServer(framework, config, path, redisUrl))
        try {
          for (const config of configs) await load(servers.get(config)!.port, keys, 1) // warm-up
          const samples = new Map<string, { rps: number; p50: number; p99: number }[]>(
            configs.map((c) => [c, []]),
          )
          for (let round = 0; round < rounds; round++) {
            for (const config of configs)
              samples.get(config)!.push(await load(servers.get(config)!.port, keys, duration))
          }
          const bare = median(samples.get('bare')!.map((sample) => sample.rps))
          for (const config of configs) {
            const list = samples.get(config)!
            const rps = median(list.map((sample) => sample.rps))
            rows.push({
              framework,
              path,
              keys,
              config,
              rps,
              ratio: rps / bare,
              p50: median(list.map((sample) => sample.p50)),
              p99: median(list.map((sample) => sample.p99)),
            })
          }
        } finally {
          for (const { child } of servers.values()) child.kill()
        }
        console.error(`http: ${framework} ${path} ${keys} key(s) done`)
      }
    }
  } finally {
    await redis.stop()
  }
  return rows
}

export function httpTable(rows: readonly HttpRow[]): string {
  return table(
    ['framework', 'path', 'keys', 'configuration', 'req/s', 'ratio to bare', 'p50 ms', 'p99 ms'],
    rows.map((row) => [
      row.framework,
      row.path,
      String(row.keys),
      row.config,
      Math.round(row.rps).toLocaleString('en-US'),
      row.ratio.toFixed(2),
      String(row.p50),
      String(row.p99),
    ]),
  )
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await runHttp({
    rounds: Number(argument('rounds', '3')),
    duration: Number(argument('duration', '3')),
    frameworks: argument('frameworks', 'express,koa,fastify').split(','),
  })
  console.log(httpTable(rows))
}
