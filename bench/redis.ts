/**
 * RedisStore throughput beside redis-benchmark running the same EVALSHA on the same server, in one run, and
 * Redis commands per decision from INFO commandstats. Starts its own redis-server on a free loopback port.
 * Run: pnpm --filter @ratewindow/bench redis
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { RateLimiter, RedisStore, slidingWindowCounter } from '@ratewindow/core'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { formatRate, median, opsPerSecond, table } from './stats.js'

const run = promisify(execFile)
const IN_FLIGHT = 50
const DECISIONS = 100_000
const ROUNDS = 3

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
    ].join('\n')
  } finally {
    await server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await runRedis())
