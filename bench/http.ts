/**
 * HTTP overhead: req/s and latency with autocannon on 127.0.0.1 for bare Express, Koa and Fastify, with
 * ratewindow (memory and Redis) and with their peers, on the allowed and the denied path, with one client key
 * and with 10k. Every configuration's server runs in its own process, started once; the rounds alternate
 * between them and the median is reported, as a ratio to the bare framework measured in the same rounds and
 * as a ratio to its floor (issue 12): `floor-headers` (bare + one hook setting two draft-7-size headers) for the
 * memory stores, `floor-redis` (that + one EVALSHA of an INCR-with-TTL script) for the Redis stores; on the allowed
 * path `floor-redis-grouped` (that EVALSHA shared by the requests of one event-loop turn), against `floor-redis`.
 * Node CPU per request is the server process's `process.cpuUsage()` delta (asked over IPC) ÷ responses; Redis
 * CPU per request is the `INFO cpu` used_cpu_sys + used_cpu_user delta ÷ responses (one redis-server, one
 * configuration loaded at a time).
 *
 * `-x4` configurations run 4 server processes, each on its own port taking a quarter of the connections:
 * `bare-x4` and `ratewindow-synced-x4` (SyncedStore, the synchronised local mode), for Koa and Fastify on the
 * allowed path. Their `ratio to bare` is to `bare-x4`, 4 processes against 4 processes.
 *
 * Run alone: pnpm --filter @ratewindow/bench http [-- --rounds 3 --duration 3 --frameworks koa]
 * Narrower runs: `--cases allowed:1,allowed:10000` keeps those (path:keys) cases; `--configs ratewindow-synced-x4`
 * runs those configurations only, with the ones their ratios are to (`bare` or `bare-x4`, their floor); a name
 * outside the default matrix runs too (`ratewindow-x4`: the memory store in 4 processes). Both default to all.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { resolve } from 'node:path'
import autocannon from 'autocannon'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { MEMORY_ONLY, PEERS } from './peers.js'
import { argument, median, table } from './stats.js'

export interface HttpRow {
  framework: string
  path: string
  keys: number
  config: string
  rps: number
  ratio: number
  /** Ratio to the floor this configuration is measured against, when it has one. */
  floorRatio?: number
  floor?: string
  /** Server CPU (user + system) per response, µs, all the configuration's processes. */
  nodeUs: number
  /** redis-server CPU per response, µs (0 for configurations that do not use Redis). */
  redisUs: number
  /** Responses per Redis script call (the mean group size); 0 when the configuration runs no script. */
  perCall: number
  p50: number
  p99: number
}

/** The (path, keys) cases: the allowed path with one key and 10k keys, the denied path with one key. */
const CASES: [string, number][] = [
  ['allowed', 1],
  ['allowed', 10_000],
  ['denied', 1],
]

export interface Server {
  port: number
  child: ChildProcess
}

/**
 * The configurations http-server.ts can start for a framework (each also as `<name>-x4`, four processes): ours,
 * the floors and that framework's peers (PEERS), with their Redis variants.
 */
export function variantsOf(framework: string): string[] {
  const peers = PEERS[framework] ?? []
  return [
    'bare',
    'floor-headers',
    'floor-key',
    'floor-redis',
    'floor-redis-grouped',
    'ratewindow',
    'ratewindow-no-headers',
    'ratewindow-default-headers',
    'ratewindow-general',
    'ratewindow-overrides',
    'ratewindow-redis',
    'ratewindow-redis-overrides',
    'ratewindow-redis-fixed',
    'ratewindow-redis-cached',
    'ratewindow-synced',
    'ratewindow-synced-overrides',
    ...peers,
    ...peers.filter((peer) => !MEMORY_ONLY.has(peer)).map((peer) => `${peer}-redis`),
  ]
}

/** Pins a process and its threads to `cpuList` (`taskset`, e.g. '1'); false where that is not possible. */
export const pinTo = (cpuList: string, pid: number): boolean =>
  spawnSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore' }).status === 0

/** The number of server processes of a configuration. */
const processesOf = (config: string) => (config.endsWith('-x4') ? 4 : 1)

/** Which floor a configuration is compared with. */
function floorOf(config: string): string | undefined {
  if (config === 'bare' || config.endsWith('-x4') || config === 'floor-headers') return undefined
  if (config === 'floor-redis') return 'floor-headers'
  return config.endsWith('-redis') || config.includes('-redis-') ? 'floor-redis' : 'floor-headers'
}

/**
 * Starts one server process. `cpus` pins it (`taskset`, e.g. '1'): the paired runs (pairs.ts) put both servers of
 * a pair on one core and the load generator on the other.
 */
export async function startServer(
  framework: string,
  variant: string,
  path: string,
  redisUrl: string,
  cpus?: string,
  /** Node flags for this server, after BENCH_NODE_FLAGS' (e.g. `--cpu-prof`: profile.ts). */
  nodeFlags: readonly string[] = [],
): Promise<Server> {
  const flags = [...(process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? []), ...nodeFlags]
  const { name, benchDir } = buildOf(variant)
  // Without the source condition the packages resolve to their built dist, as users get them.
  const child: ChildProcess = spawn(
    process.execPath,
    [...flags, '--import', 'tsx', 'http-server.ts', framework, name, path],
    {
      cwd: benchDir,
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      env: { ...process.env, REDIS_URL: redisUrl },
    },
  )
  if (cpus !== undefined && !pinTo(cpus, child.pid!))
    console.error(`bench: could not pin a ${variant} server to CPU ${cpus}`)
  try {
    return { port: await portOf(child, `${framework} ${variant}`), child }
  } catch (error) {
    child.kill()
    throw error
  }
}

/**
 * `<variant>@before` runs the variant from an earlier checkout, built and installed, whose root is in
 * `BENCH_BEFORE` (for a paired before/after run of a change: `git worktree add ../before <commit>`, then
 * `pnpm install && pnpm build` there); any other variant runs from this checkout.
 */
export function buildOf(variant: string): { name: string; benchDir: string } {
  if (!variant.endsWith('@before')) return { name: variant, benchDir: import.meta.dirname }
  const root = process.env.BENCH_BEFORE
  if (!root) throw new Error(`bench: ${variant} needs BENCH_BEFORE, the root of the earlier checkout`)
  return { name: variant.slice(0, -'@before'.length), benchDir: resolve(root, 'bench') }
}

/**
 * The port a server process prints once listening (the line `{"port":N}`: other lines, such as `--trace-gc`'s,
 * may come before it). Rejects when the process exits (or cannot be spawned) before printing it, e.g. on a
 * variant its framework does not have: waiting for a line that never comes left the caller hanging for as long
 * as its other servers kept the event loop alive.
 */
export async function portOf(child: ChildProcess, name: string): Promise<number> {
  const stop = new AbortController()
  let output = ''
  const port = new Promise<number>((resolve) => {
    const read = (chunk: Buffer) => {
      output += chunk.toString()
      const line = /^\{"port":(\d+)\}$/m.exec(output)
      if (line === null) return
      child.stdout!.off('data', read)
      resolve(Number(line[1]))
    }
    child.stdout!.on('data', read)
    stop.signal.addEventListener('abort', () => child.stdout!.off('data', read))
  })
  try {
    return await Promise.race([
      port,
      once(child, 'exit', { signal: stop.signal }).then(([code, signal]) => {
        throw new Error(
          `bench server ${name} exited (${signal ?? `code ${code}`}) before listening; its error is above`,
        )
      }),
    ])
  } finally {
    stop.abort()
  }
}

async function cpuOf(child: ChildProcess): Promise<number> {
  const reply = once(child, 'message') as Promise<[{ cpu: number }]>
  child.send('cpu')
  return (await reply)[0].cpu
}

async function redisCpu(redis: Redis): Promise<number> {
  const info = await redis.info('cpu')
  const field = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? 0)
  return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6
}

/** Script calls (EVALSHA and EVAL) the server has run so far: with responses, the decisions per call. */
export async function scriptCalls(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats')
  let calls = 0
  for (const match of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) calls += Number(match[1])
  return calls
}

/**
 * One load run against all of a configuration's servers at once, `connections` shared between them; Redis CPU
 * per response when `redis` is given (else 0).
 */
export async function load(
  servers: readonly Server[],
  keys: number,
  /** Seconds, or a number of requests (spread over the servers). */
  length: number | { requests: number },
  connections: number,
  redis?: Redis,
) {
  const cpuBefore = await Promise.all(servers.map((server) => cpuOf(server.child)))
  const redisBefore = redis ? await redisCpu(redis) : 0
  const scriptsBefore = redis ? await scriptCalls(redis) : 0
  const results = await Promise.all(
    servers.map((server, i) =>
      loadOne(
        server.port,
        keys,
        typeof length === 'number' ? length : { requests: Math.ceil(length.requests / servers.length) },
        Math.floor(connections / servers.length) + (i < connections % servers.length ? 1 : 0),
      ),
    ),
  )
  const redisAfter = redis ? await redisCpu(redis) : 0
  const scriptsAfter = redis ? await scriptCalls(redis) : 0
  const cpuAfter = await Promise.all(servers.map((server) => cpuOf(server.child)))
  const responses = results.reduce((sum, result) => sum + result.responses, 0) || 1
  const nodeCpu = cpuAfter.reduce((sum, cpu, i) => sum + cpu - cpuBefore[i]!, 0)
  return {
    responses,
    rps: results.reduce((sum, result) => sum + result.rps, 0),
    p50: median(results.map((result) => result.p50)),
    p99: Math.max(...results.map((result) => result.p99)),
    nodeUs: nodeCpu / responses,
    redisUs: (redisAfter - redisBefore) / responses,
    /** Responses per script call: the mean group size of a grouping store (1 for one call per request). */
    perCall: scriptsAfter > scriptsBefore ? responses / (scriptsAfter - scriptsBefore) : 0,
  }
}

async function loadOne(
  port: number,
  keys: number,
  length: number | { requests: number },
  connections: number,
) {
  let next = 0
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/`,
    connections,
    ...(typeof length === 'number' ? { duration: length } : { amount: length.requests }),
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
    responses: result.requests.total,
  }
}

/** The configurations a row's ratios need besides itself: its bare reference and its floor. */
function referencesOf(config: string): string[] {
  const floor = floorOf(config)
  return [config.endsWith('-x4') ? 'bare-x4' : 'bare', ...(floor ? [floor, ...referencesOf(floor)] : [])]
}

export async function runHttp(
  options: {
    rounds?: number
    duration?: number
    frameworks?: string[]
    /** `path:keys` cases to run (e.g. `allowed:10000`); all by default. */
    cases?: string[]
    /** Configurations to run, with the ones their ratios are to; all by default. */
    configs?: string[]
  } = {},
): Promise<HttpRow[]> {
  const rounds = options.rounds ?? 3
  const duration = options.duration ?? 3
  const redis = await RedisServer.start()
  const redisUrl = `redis://127.0.0.1:${redis.port}`
  const info = new Redis(redisUrl)
  const rows: HttpRow[] = []
  try {
    for (const framework of options.frameworks ?? ['express', 'koa', 'fastify']) {
      const peers = PEERS[framework]!
      for (const [path, keys] of CASES) {
        if (options.cases && !options.cases.includes(`${path}:${keys}`)) continue
        const all = [
          'bare',
          'floor-headers',
          'floor-redis',
          // What grouping can reach (issue 33): the floor's INCRs of a turn in one call.
          ...(path === 'allowed' ? ['floor-redis-grouped'] : []),
          'ratewindow',
          'ratewindow-redis',
          ...(path === 'denied' ? ['ratewindow-redis-cached'] : []),
          // The peers' Redis stores are fixed windows: the same algorithm on our store, for a like-for-like row.
          ...(path === 'allowed' && keys === 1 ? ['ratewindow-redis-fixed'] : []),
          ...peers,
          ...peers.filter((peer) => !MEMORY_ONLY.has(peer)).map((peer) => `${peer}-redis`),
          // The synchronised local mode, 4 processes against 4 bare processes (Express has no row: issue 12
          // asks for Koa and Fastify).
          ...(path === 'allowed' && framework !== 'express' ? ['bare-x4', 'ratewindow-synced-x4'] : []),
        ]
        // Named configurations run even outside the default matrix (e.g. `ratewindow-x4`, the memory store in 4
        // processes), after the ones of the matrix, in its order.
        const wanted = options.configs?.flatMap((config) => [...referencesOf(config), config])
        const configs = wanted ? [...new Set([...all.filter((c) => wanted.includes(c)), ...wanted])] : all
        const servers = new Map<string, Server[]>()
        try {
          for (const config of configs) {
            const list: Server[] = []
            servers.set(config, list)
            for (let i = 0; i < processesOf(config); i++)
              list.push(await startServer(framework, config.replace(/-x4$/, ''), path, redisUrl))
          }
          for (const config of configs) await load(servers.get(config)!, keys, 1, 50, info) // warm-up
          type Sample = Awaited<ReturnType<typeof load>>
          const samples = new Map<string, Sample[]>(configs.map((c) => [c, []]))
          for (let round = 0; round < rounds; round++) {
            for (const config of configs)
              samples.get(config)!.push(await load(servers.get(config)!, keys, duration, 50, info))
          }
          const rpsOf = (config: string) => median(samples.get(config)!.map((sample) => sample.rps))
          for (const config of configs) {
            const list = samples.get(config)!
            const rps = rpsOf(config)
            const floor = floorOf(config)
            rows.push({
              framework,
              path,
              keys,
              config,
              rps,
              ratio: rps / rpsOf(config.endsWith('-x4') ? 'bare-x4' : 'bare'),
              floor,
              floorRatio: floor ? rps / rpsOf(floor) : undefined,
              nodeUs: median(list.map((sample) => sample.nodeUs)),
              redisUs: median(list.map((sample) => sample.redisUs)),
              perCall: median(list.map((sample) => sample.perCall)),
              p50: median(list.map((sample) => sample.p50)),
              p99: median(list.map((sample) => sample.p99)),
            })
          }
        } finally {
          for (const list of servers.values()) for (const { child } of list) child.kill()
        }
        console.error(`http: ${framework} ${path} ${keys} key(s) done`)
      }
    }
  } finally {
    info.disconnect()
    await redis.stop()
  }
  return rows
}

export function httpTable(rows: readonly HttpRow[]): string {
  return table(
    [
      'framework',
      'path',
      'keys',
      'configuration',
      'req/s',
      'ratio to bare',
      'ratio to floor',
      'Node µs/req',
      'Redis µs/req',
      'req per script call',
      'p50 ms',
      'p99 ms',
    ],
    rows.map((row) => [
      row.framework,
      row.path,
      String(row.keys),
      row.config,
      Math.round(row.rps).toLocaleString('en-US'),
      row.ratio.toFixed(2),
      row.floorRatio === undefined ? '' : `${row.floorRatio.toFixed(2)} (${row.floor})`,
      row.nodeUs.toFixed(1),
      row.redisUs < 0.05 ? '' : row.redisUs.toFixed(1),
      row.perCall === 0 ? '' : row.perCall.toFixed(1),
      String(row.p50),
      String(row.p99),
    ]),
  )
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await runHttp({
    rounds: Number(argument('rounds') ?? '3'),
    duration: Number(argument('duration') ?? '3'),
    frameworks: (argument('frameworks') ?? 'express,koa,fastify').split(','),
    cases: argument('cases')?.split(','),
    configs: argument('configs')?.split(','),
  })
  console.log(httpTable(rows))
}
