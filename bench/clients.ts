/**
 * RedisStore through each supported client on the same redis-server, in one run: decisions per second and Node
 * CPU per decision (process.cpuUsage: every thread of the process, GLIDE's native core included). Each round runs
 * every client once, in turn, so that the machine's noise spreads over all of them; figures are medians.
 * Run: pnpm --filter @ratewindow/bench clients
 */
import { RateLimiter, type RedisClient, RedisStore, slidingWindowCounter } from '@ratewindow/core'
import { GlideClient, Logger } from '@valkey/valkey-glide'
import { Redis as Ioredis5 } from 'ioredis'
import { Redis as Ioredis6 } from 'ioredis6'
import { Redis as Iovalkey } from 'iovalkey'
import { createClient as createNodeRedis6 } from 'redis'
import { createClient as createNodeRedis5 } from 'redis5'
import { RedisServer } from '../test/support/redis-server.js'
import { formatRate, median, table } from './stats.js'

const IN_FLIGHT = 50
const DECISIONS = Number(process.env.CLIENT_DECISIONS ?? 20_000)
const ROUNDS = Number(process.env.CLIENT_ROUNDS ?? 3)
const HOST = '127.0.0.1'

interface Candidate {
  name: string
  connect(port: number): Promise<{ client: RedisClient; close(): Promise<void> | void }>
}

type IoredisLike = RedisClient & { ping(): Promise<unknown>; disconnect(): void }
const ioredisOptions = (port: number, enableAutoPipelining = false) => ({
  host: HOST,
  port,
  enableAutoPipelining,
  maxRetriesPerRequest: 1,
})
const ioredis = (name: string, make: (port: number) => IoredisLike): Candidate => ({
  name,
  async connect(port: number) {
    const client = make(port)
    await client.ping()
    return { client, close: () => client.disconnect() }
  },
})

const CANDIDATES: Candidate[] = [
  ioredis('ioredis 5', (port) => new Ioredis5(ioredisOptions(port))),
  ioredis('ioredis 5, enableAutoPipelining', (port) => new Ioredis5(ioredisOptions(port, true))),
  ioredis('ioredis 6', (port) => new Ioredis6(ioredisOptions(port))),
  ioredis('iovalkey', (port) => new Iovalkey(ioredisOptions(port))),
  {
    name: 'node-redis 6 (pipelines same-tick commands)',
    async connect(port) {
      const client = await createNodeRedis6({ url: `redis://${HOST}:${port}` }).connect()
      return { client, close: () => client.destroy() }
    },
  },
  {
    name: 'node-redis 6, RESP: 2',
    async connect(port) {
      const client = await createNodeRedis6({ url: `redis://${HOST}:${port}`, RESP: 2 }).connect()
      return { client, close: () => client.destroy() }
    },
  },
  {
    name: 'node-redis 5 (pipelines same-tick commands)',
    async connect(port) {
      const client = await createNodeRedis5({ url: `redis://${HOST}:${port}` }).connect()
      return { client, close: () => client.destroy() }
    },
  },
  {
    name: 'valkey-glide 2',
    async connect(port) {
      const client = await GlideClient.createClient({ addresses: [{ host: HOST, port }] })
      return { client, close: () => client.close() }
    },
  },
]

/** One round of DECISIONS decisions, IN_FLIGHT at a time: wall seconds and CPU µs spent by the process. */
async function round(limiter: RateLimiter): Promise<{ seconds: number; cpuMicros: number }> {
  const cpu = process.cpuUsage()
  const start = process.hrtime.bigint()
  let next = 0
  const worker = async () => {
    while (next < DECISIONS) await limiter.limit(`client-${next++ % 10_000}`)
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  const used = process.cpuUsage(cpu)
  return { seconds, cpuMicros: used.user + used.system }
}

export async function runClients(): Promise<string> {
  Logger.setLoggerConfig('off')
  const server = await RedisServer.start()
  const connected: { close(): Promise<void> | void }[] = []
  try {
    const rule = slidingWindowCounter({ limit: 1_000_000_000, window: '1m' })
    const subjects = []
    for (const candidate of CANDIDATES) {
      const { client, close } = await candidate.connect(server.port)
      connected.push({ close })
      const limiter = new RateLimiter({ rules: rule, store: new RedisStore({ client }), timeout: '10s' })
      await round(limiter) // warm-up: loads the script, lets the JIT settle
      subjects.push({ name: candidate.name, limiter, rates: [] as number[], cpu: [] as number[] })
    }
    for (let i = 0; i < ROUNDS; i++) {
      for (const subject of subjects) {
        const { seconds, cpuMicros } = await round(subject.limiter)
        subject.rates.push(DECISIONS / seconds)
        subject.cpu.push(cpuMicros / DECISIONS)
      }
    }
    const version = /redis_version:(\S+)/.exec(await server.cli('info', 'server'))?.[1]
    const best = Math.max(...subjects.map((subject) => median(subject.rates)))
    return [
      `RedisStore per client on one redis-server ${version}, sliding window counter, ${IN_FLIGHT} decisions in flight on ` +
        `one connection, ${DECISIONS.toLocaleString('en-US')} decisions per round, median of ${ROUNDS} interleaved rounds:`,
      '',
      table(
        ['client', 'decisions/s', 'ratio to the fastest', 'Node CPU µs per decision'],
        subjects.map((subject) => [
          subject.name,
          formatRate(median(subject.rates)),
          (median(subject.rates) / best).toFixed(2),
          median(subject.cpu).toFixed(1),
        ]),
      ),
    ].join('\n')
  } finally {
    await Promise.all(connected.map((client) => client.close()))
    await server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await runClients())
