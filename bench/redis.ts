/**
 * RedisStore throughput beside redis-benchmark running the same EVALSHA on the same server, in one run; Redis CPU
 * per decision beside the one-round-trip floor (an EVALSHA that only INCRs a key with a TTL), side by side in
 * alternating rounds; and Redis commands per decision from INFO commandstats. Starts its own redis-server on a free
 * loopback port.
 * Issue 46 (`--groups`): Redis CPU per decision at fixed group sizes (the scripts RedisStore sends for a group of
 * 1, 16 and 64 decisions, called directly, so that the figure does not depend on how many requests one turn of the
 * event loop happened to gather), and Node CPU per decision with a new key each time, this build against
 * BENCH_BEFORE's.
 * Run: pnpm --filter @ratewindow/bench redis
 */
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { RateLimiter, RedisStore, slidingWindowCounter } from '@ratewindow/core'
import { Redis } from 'ioredis'
// The batch script's keys and arguments as RedisStore builds them (internal: not exported by the package).
import {
  type BatchCall,
  batchArguments,
  singleArguments,
} from '../packages/core/src/stores/redis/batch-script.js'
import { prepareRuleSet } from '../packages/core/src/stores/redis/send-group.js'
import { RedisServer } from '../test/support/redis-server.js'
import { formatRate, median, opsPerSecond, table } from './stats.js'

const run = promisify(execFile)
const IN_FLIGHT = 50
const DECISIONS = 100_000
const ROUNDS = 3
/** The one-round-trip floor of issue 12 (bench/http-server.ts `floor-redis`): one INCR, a TTL on the first. */
const INCR_TTL = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`
const CPU_DECISIONS = 50_000
const CPU_ROUNDS = 5
const CPU_KEYS = 10_000

/** redis-server's CPU time so far (used_cpu_sys + used_cpu_user, seconds), from INFO cpu. */
async function redisCpu(client: Redis): Promise<number> {
  const info = await client.info('cpu')
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN)
  return field('used_cpu_sys') + field('used_cpu_user')
}

/** Redis CPU µs per decision while `decide` runs `CPU_DECISIONS` decisions, 50 in flight, over 10k keys. */
async function cpuPerDecision(admin: Redis, decide: (key: string) => Promise<unknown>): Promise<number> {
  const before = await redisCpu(admin)
  let next = 0
  const worker = async () => {
    while (next < CPU_DECISIONS) await decide(`client-${next++ % CPU_KEYS}`)
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  return (((await redisCpu(admin)) - before) * 1e6) / CPU_DECISIONS
}

/** Redis CPU µs per decision of redis-benchmark running one EVALSHA, 50 clients, 10k keys, no pipelining. */
async function cpuPerBenchmarkCall(admin: Redis, port: number, args: readonly string[]): Promise<number> {
  const before = await redisCpu(admin)
  await run('redis-benchmark', [
    ...['-h', '127.0.0.1', '-p', String(port), '-c', String(IN_FLIGHT), '-n', String(CPU_DECISIONS)],
    ...['-r', String(CPU_KEYS), '-q', ...args],
  ])
  return (((await redisCpu(admin)) - before) * 1e6) / CPU_DECISIONS
}

/** Commands run by Redis per decision (inside the script included), from INFO commandstats. */
async function commandsPerDecision(admin: Redis, decisions: number, decide: () => Promise<unknown>) {
  await admin.config('RESETSTAT')
  for (let i = 0; i < decisions; i++) await decide()
  const stats = await admin.info('commandstats')
  const counts = [...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)]
    .filter(([, name]) => name !== 'info' && name !== 'config')
    .map(([, name, calls]) => [name!, Number(calls) / decisions] as const)
  const inScript = counts.filter(([name]) => name !== 'evalsha' && name !== 'eval')
  return {
    total: inScript.reduce((sum, [, calls]) => sum + calls, 0),
    detail: inScript.map(([name, calls]) => `${name.toUpperCase()} ${calls.toFixed(2)}`).join(' + '),
  }
}

interface CpuFigures {
  node: { floor: number; ours: number; script: number }
  benchmark: { floor: number; ours: number }
  allowed: { total: number; detail: string }
  denied: { total: number; detail: string }
}

/** Redis CPU per decision, the floor's and ours, in alternating rounds (medians); commands per decision. */
async function redisCpuFigures(port: number): Promise<CpuFigures> {
  const admin = new Redis({ port, host: '127.0.0.1' })
  const client = new Redis({ port, host: '127.0.0.1' })
  client.defineCommand('floor', { numberOfKeys: 1, lua: INCR_TTL }) // EVALSHA, EVAL once on NOSCRIPT
  const floor = client as Redis & { floor(key: string, ttl: number): Promise<number> }
  const rule = slidingWindowCounter({ limit: 1_000_000_000, window: '1m' })
  const limiter = new RateLimiter({ rules: rule, store: new RedisStore({ client }), prefix: 'cpu' })
  const floorSha = String(await admin.script('LOAD', INCR_TTL))
  const oursSha = String(await admin.script('LOAD', RedisStore.scriptFor([rule]).lua))
  // The arguments RedisStore sends for this rule: mode, now (-1: the server's TIME), cost, limit, window.
  const oursArgs = ['0', '-1', '1', ...rule.script.params.slice(0, 2).map(String)]
  const node = { floor: [] as number[], ours: [] as number[], script: [] as number[] }
  const benchmark = { floor: [] as number[], ours: [] as number[] }
  for (let round = 0; round <= CPU_ROUNDS; round++) {
    // Round 0 warms up (keys created, scripts compiled) and is not counted.
    const figures = [
      await cpuPerDecision(admin, (key) => floor.floor(`floor{${key}}`, 60_000)),
      await cpuPerDecision(admin, (key) => limiter.limit(key)),
      await cpuPerDecision(admin, (key) =>
        client.evalsha(oursSha, 1, `direct{${key}}:swc60000`, ...oursArgs),
      ),
      await cpuPerBenchmarkCall(admin, port, ['evalsha', floorSha, '1', 'floor{__rand_int__}', '60000']),
      await cpuPerBenchmarkCall(admin, port, [
        'evalsha',
        oursSha,
        '1',
        'b{__rand_int__}:swc60000',
        ...oursArgs,
      ]),
    ]
    if (round === 0) continue
    node.floor.push(figures[0]!)
    node.ours.push(figures[1]!)
    node.script.push(figures[2]!)
    benchmark.floor.push(figures[3]!)
    benchmark.ours.push(figures[4]!)
  }
  const allowed = await commandsPerDecision(admin, 2_000, () => limiter.limit('commands'))
  const full = new RateLimiter({
    rules: slidingWindowCounter({ limit: 1, window: '1h' }),
    store: new RedisStore({ client }),
    prefix: 'cpu-denied',
  })
  await full.limit('commands')
  const denied = await commandsPerDecision(admin, 2_000, () => full.limit('commands'))
  await Promise.all([admin.quit(), client.quit()])
  return {
    node: { floor: median(node.floor), ours: median(node.ours), script: median(node.script) },
    benchmark: { floor: median(benchmark.floor), ours: median(benchmark.ours) },
    allowed,
    denied,
  }
}

async function decisionsPerSecond(limiter: RateLimiter, keys: number): Promise<number> {
  return opsPerSecond(ROUNDS, DECISIONS, async () => {
    let next = 0
    const worker = async () => {
      while (next < DECISIONS) await limiter.limit(`client-${next++ % keys}`)
    }
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  })
}

/** redis-benchmark running one EVALSHA of our script, 50 clients, no pipelining: the server's own ceiling. */
async function redisBenchmark(port: number, sha: string): Promise<number> {
  const rates: number[] = []
  for (let i = 0; i < ROUNDS; i++) {
    const { stdout } = await run('redis-benchmark', [
      ...['-h', '127.0.0.1', '-p', String(port), '-c', String(IN_FLIGHT), '-n', String(DECISIONS), '-q'],
      ...[
        'evalsha',
        sha,
        '1',
        'bench{__rand_int__}:swc60000',
        '0',
        '-1',
        '1',
        '0',
        '3',
        '1000000000',
        '60000',
        '0',
      ],
    ])
    rates.push(Number(/([\d.]+) requests per second/.exec(stdout)?.[1] ?? Number.NaN))
  }
  return median(rates)
}

const FLOOD = 10_000

/** Redis calls per denied request when one blocked client floods, without and with the blocked-key cache. */
async function deniedFlood(client: Redis): Promise<{ uncached: number; cached: number }> {
  const perDenied = async (blockedCache: boolean) => {
    const limiter = new RateLimiter({
      rules: slidingWindowCounter({ limit: 1, window: '1h' }),
      store: new RedisStore({ client }),
      prefix: `flood${blockedCache}`,
      blockedCache,
    })
    await limiter.limit('attacker')
    await client.config('RESETSTAT')
    for (let i = 0; i < FLOOD; i++) await limiter.limit('attacker')
    const stats = await client.info('commandstats')
    return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0) / FLOOD
  }
  return { uncached: await perDenied(false), cached: await perDenied(true) }
}

/** The Redis CPU figures as Markdown. */
function cpuSection(cpu: CpuFigures): string {
  return [
    `Redis CPU per decision (INFO cpu: used_cpu_sys + used_cpu_user delta ÷ decisions), ${CPU_DECISIONS.toLocaleString('en-US')} ` +
      `decisions over ${CPU_KEYS.toLocaleString('en-US')} keys per round, ${IN_FLIGHT} in flight, the floor and ours alternating, ` +
      `median of ${CPU_ROUNDS} rounds. The floor is one EVALSHA of a script that only INCRs a key (with a TTL on the first); ` +
      'ours is the default rule (sliding window counter, server time), admitted. Redis CPU per decision also depends ' +
      'on how many commands arrive per read: the lighter the Node side, the larger the batches, so the second row ' +
      'sends our script exactly as the first row sends the floor, without the limiter.',
    '',
    table(
      ['driver', 'floor µs', 'RedisStore µs', 'ratio'],
      [
        [
          'ioredis, 1 connection (RedisStore.limit / the floor script)',
          cpu.node.floor.toFixed(2),
          cpu.node.ours.toFixed(2),
          (cpu.node.ours / cpu.node.floor).toFixed(2),
        ],
        [
          "ioredis, 1 connection (our script with RedisStore's arguments, called like the floor)",
          cpu.node.floor.toFixed(2),
          cpu.node.script.toFixed(2),
          (cpu.node.script / cpu.node.floor).toFixed(2),
        ],
        [
          "redis-benchmark, 50 clients (our script with RedisStore's arguments)",
          cpu.benchmark.floor.toFixed(2),
          cpu.benchmark.ours.toFixed(2),
          (cpu.benchmark.ours / cpu.benchmark.floor).toFixed(2),
        ],
      ],
    ),
    '',
    `Commands Redis runs per decision inside the script (INFO commandstats): admitted ${cpu.allowed.total.toFixed(2)} ` +
      `(${cpu.allowed.detail}), denied ${cpu.denied.total.toFixed(2)} (${cpu.denied.detail}); the floor runs 1 (INCR).`,
  ].join('\n')
}

/** The group sizes of issue 46's Redis CPU target, and its rounds. */
export const GROUP_SIZES = [1, 16, 64] as const
const GROUP_ROUNDS = 7
const GROUP_DECISIONS = 64 * 600

/** Redis CPU per decision at one group size: ours and the per-request floor's, medians, by key count. */
export interface GroupedCpuRow {
  keys: number
  group: number
  floorUs: number
  oursUs: number
  /** The median of the rounds' ratios (ours ÷ the floor's, measured one after the other in each round). */
  ratio: number
}

/**
 * Redis CPU per decision of the script RedisStore sends for a group of `group` decisions (the single-decision
 * script for 1, the batch script otherwise: the keys and arguments `sendGroup` builds), `IN_FLIGHT` decisions in
 * flight, against the per-request floor (one EVALSHA of INCR with a TTL per decision), in alternating rounds.
 * With 1 key every decision is of that key; with 10,000 the decisions take the keys in turn (a group of 16 holds
 * 16 keys).
 */
async function groupedCpu(port: number): Promise<GroupedCpuRow[]> {
  const admin = new Redis({ port, host: '127.0.0.1' })
  const client = new Redis({ port, host: '127.0.0.1' })
  const rule = slidingWindowCounter({ limit: 1_000_000_000, window: '1m' })
  const prepared = prepareRuleSet([rule], undefined, undefined, () => undefined)
  const floorSha = String(await admin.script('LOAD', INCR_TTL))
  const singleSha = String(await admin.script('LOAD', prepared.script.lua))
  const batchSha = String(await admin.script('LOAD', prepared.batch.lua))
  const call = (base: string): BatchCall => ({ base, mode: 0, now: -1, request: { cost: 1 }, at: 0 })
  /** Redis CPU µs per decision of `calls` script calls of `group` decisions each, `IN_FLIGHT` decisions in flight. */
  const measure = async (group: number, send: (index: number) => Promise<unknown>) => {
    const calls = GROUP_DECISIONS / group
    const inFlight = Math.max(1, Math.round(IN_FLIGHT / group))
    const before = await redisCpu(admin)
    let next = 0
    const worker = async () => {
      while (next < calls) await send(next++)
    }
    await Promise.all(Array.from({ length: inFlight }, worker))
    return (((await redisCpu(admin)) - before) * 1e6) / GROUP_DECISIONS
  }
  const rows: GroupedCpuRow[] = []
  for (const keys of [1, CPU_KEYS]) {
    const keyOf = (decision: number) => `g{client-${decision % keys}}`
    for (const group of GROUP_SIZES) {
      const ours = (index: number) => {
        const first = index * group
        if (group === 1) {
          const only = call(keyOf(first))
          return client.evalsha(
            singleSha,
            1,
            `${only.base}${prepared.suffixes[0]}`,
            ...singleArguments(only, prepared.args),
          )
        }
        const calls = Array.from({ length: group }, (_, i) => call(keyOf(first + i)))
        const { keys: names, args } = batchArguments(calls, prepared.suffixes, prepared.args)
        return client.evalsha(batchSha, names.length, ...names, ...args)
      }
      const floor = (index: number) => client.evalsha(floorSha, 1, `floor${keyOf(index)}`, '60000')
      const figures = { floor: [] as number[], ours: [] as number[], ratio: [] as number[] }
      for (let round = 0; round <= GROUP_ROUNDS; round++) {
        // Round 0 warms up (keys created) and is not counted.
        const floorUs = await measure(1, floor)
        const oursUs = await measure(group, ours)
        if (round === 0) continue
        figures.floor.push(floorUs)
        figures.ours.push(oursUs)
        figures.ratio.push(oursUs / floorUs)
      }
      rows.push({
        keys,
        group,
        floorUs: median(figures.floor),
        oursUs: median(figures.ours),
        ratio: median(figures.ratio),
      })
    }
  }
  await Promise.all([admin.quit(), client.quit()])
  return rows
}

/** Node CPU per decision of RedisStore with a new key per decision: this build's and BENCH_BEFORE's, if given. */
export interface NodeCpuFigures {
  ours: number
  before: number | undefined
  /** The median of the rounds' ratios (this build ÷ the build before). */
  ratio: number | undefined
}

const NODE_DECISIONS = 20_000

/**
 * Node CPU µs per decision (process.cpuUsage, user + system) of `limit()` on RedisStore with ioredis, a new key for
 * every decision, `IN_FLIGHT` in flight: this build and the build in BENCH_BEFORE in alternating rounds, each on a
 * client of its own, medians of 7.
 */
async function nodeCpuNewKeys(port: number): Promise<NodeCpuFigures> {
  type Core = typeof import('@ratewindow/core')
  const root = process.env.BENCH_BEFORE
  const builds: Core[] = [await import('@ratewindow/core')]
  if (root) builds.push(await import(pathToFileURL(resolve(root, 'packages/core/dist/index.js')).href))
  const clients = builds.map(() => new Redis({ port, host: '127.0.0.1' }))
  const limiters = builds.map(
    (core, i) =>
      new core.RateLimiter({
        rules: core.slidingWindowCounter({ limit: 1_000_000_000, window: '1m' }),
        store: new core.RedisStore({ client: clients[i]! }),
        prefix: `node-cpu-${i}`,
      }),
  )
  let serial = 0
  const cpuPerDecision = async (limiter: RateLimiter) => {
    const before = process.cpuUsage()
    let next = 0
    const worker = async () => {
      while (next++ < NODE_DECISIONS) await limiter.limit(`new-${serial++}`)
    }
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
    const used = process.cpuUsage(before)
    return (used.user + used.system) / NODE_DECISIONS
  }
  const figures = builds.map(() => [] as number[])
  const ratios: number[] = []
  for (let round = 0; round <= GROUP_ROUNDS; round++) {
    // Which build goes first alternates; round 0 warms both up.
    const order = round % 2 === 0 ? limiters.map((_, i) => i) : limiters.map((_, i) => i).reverse()
    const each: number[] = []
    for (const i of order) each[i] = await cpuPerDecision(limiters[i] as RateLimiter)
    if (round === 0) continue
    for (const [i, us] of each.entries()) figures[i]!.push(us)
    if (each.length > 1) ratios.push(each[0]! / each[1]!)
  }
  await Promise.all(clients.map((client) => client.quit()))
  return {
    ours: median(figures[0]!),
    before: figures[1] ? median(figures[1]) : undefined,
    ratio: ratios.length > 0 ? median(ratios) : undefined,
  }
}

/** The fixed-group Redis CPU and the Node CPU figures, as Markdown. */
function groupedSection(rows: readonly GroupedCpuRow[], node: NodeCpuFigures): string {
  return [
    `Redis CPU per decision at fixed group sizes (issue 46): the script RedisStore sends for a group of that many ` +
      `decisions (the single-decision script for 1), called directly with the keys and arguments RedisStore builds, ` +
      `${IN_FLIGHT} decisions in flight, against the per-request floor (one EVALSHA of INCR with a TTL per decision), ` +
      `${GROUP_DECISIONS.toLocaleString('en-US')} decisions per measure, the two alternating, median of ${GROUP_ROUNDS} rounds ` +
      '(the ratio is the median of the rounds’ ratios):',
    '',
    table(
      ['keys', 'group', 'floor µs', 'ours µs', 'ratio'],
      rows.map((row) => [
        row.keys.toLocaleString('en-US'),
        String(row.group),
        row.floorUs.toFixed(2),
        row.oursUs.toFixed(2),
        row.ratio.toFixed(2),
      ]),
    ),
    '',
    `Node CPU per decision, a new key for each (\`limit()\` on RedisStore with ioredis, ${IN_FLIGHT} in flight, ` +
      `${NODE_DECISIONS.toLocaleString('en-US')} decisions per measure, median of ${GROUP_ROUNDS}): ${node.ours.toFixed(1)} µs` +
      (node.before === undefined || node.ratio === undefined
        ? ' (set BENCH_BEFORE for the build before).'
        : `, the build before ${node.before.toFixed(1)} µs: ${node.ratio.toFixed(2)} × (median of the rounds' ratios).`),
  ].join('\n')
}

/** The fixed-group Redis CPU and Node CPU figures alone: `pnpm --filter @ratewindow/bench redis-groups`. */
export async function runGroupedCpu(): Promise<{
  rows: GroupedCpuRow[]
  node: NodeCpuFigures
  text: string
}> {
  const server = await RedisServer.start()
  try {
    const rows = await groupedCpu(server.port)
    const node = await nodeCpuNewKeys(server.port)
    return { rows, node, text: groupedSection(rows, node) }
  } finally {
    await server.stop()
  }
}

/** Only the Redis CPU figures, on a redis-server of their own: `pnpm --filter @ratewindow/bench redis-cpu`. */
export async function runRedisCpu(): Promise<string> {
  const server = await RedisServer.start()
  try {
    return cpuSection(await redisCpuFigures(server.port))
  } finally {
    await server.stop()
  }
}

export async function runRedis(): Promise<string> {
  const server = await RedisServer.start()
  try {
    const plain = new Redis({ port: server.port, host: '127.0.0.1' })
    const pipelined = new Redis({ port: server.port, host: '127.0.0.1', enableAutoPipelining: true })
    const rule = slidingWindowCounter({ limit: 1_000_000_000, window: '1m' })
    const ours = new RateLimiter({ rules: rule, store: new RedisStore({ client: plain }) })
    const oursAuto = new RateLimiter({ rules: rule, store: new RedisStore({ client: pipelined }) })
    await ours.limit('warm-up')

    const sha = String(await plain.script('LOAD', RedisStore.scriptFor([rule]).lua))

    await plain.config('RESETSTAT')
    const oneKey = await decisionsPerSecond(ours, 1)
    const stats = await plain.info('commandstats')
    const manyKeys = await decisionsPerSecond(ours, 10_000)
    const auto = await decisionsPerSecond(oursAuto, 10_000)
    const baseline = await redisBenchmark(server.port, sha)

    const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
    const decisions = DECISIONS * (ROUNDS + 1)
    const fromClient = calls('evalsha') + calls('eval')
    const flood = await deniedFlood(plain)
    const cpu = await redisCpuFigures(server.port)
    const version = (await plain.info('server')).match(/redis_version:(\S+)/)?.[1]
    await Promise.all([plain.quit(), pipelined.quit()])
    return [
      `RedisStore on redis-server ${version}, ${IN_FLIGHT} in flight, median of ${ROUNDS}:`,
      '',
      table(
        ['what', 'decisions/s', 'ratio to redis-benchmark'],
        [
          ['redis-benchmark EVALSHA (50 clients)', formatRate(baseline), '1.00'],
          ['RedisStore, 1 key, 1 connection', formatRate(oneKey), (oneKey / baseline).toFixed(2)],
          ['RedisStore, 10k keys, 1 connection', formatRate(manyKeys), (manyKeys / baseline).toFixed(2)],
          ['RedisStore, 10k keys, auto-pipelining', formatRate(auto), (auto / baseline).toFixed(2)],
        ],
      ),
      '',
      `Commands sent by the client per decision (INFO commandstats): ${(fromClient / decisions).toFixed(3)} ` +
        `(evalsha ${calls('evalsha')}, eval ${calls('eval')} for ${decisions} decisions).`,
      '',
      `A flood of ${FLOOD.toLocaleString('en-US')} requests from one blocked client: Redis calls per denied request ` +
        `${flood.uncached.toFixed(3)} without the blocked-key cache, ${flood.cached.toFixed(4)} with \`blockedCache: true\`.`,
      '',
      cpuSection(cpu),
    ].join('\n')
  } finally {
    await server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(
    process.argv.includes('--groups')
      ? (await runGroupedCpu()).text
      : process.argv.includes('--cpu')
        ? await runRedisCpu()
        : await runRedis(),
  )
}
