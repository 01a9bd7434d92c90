/**
 * A flood of concurrent decisions in one process on Redis: 10 ioredis connections, one RedisStore per connection,
 * a limit of 1,000 per minute per key, default options (timeout 250 ms, onStoreError 'allow'); N `limit()` calls at
 * once on 1 key or spread over 10,000 keys. Counts what was admitted, refused by the store, answered by the failure
 * policy and shed, beside rate-limiter-flexible's RateLimiterRedis in the same setup. A local redis-server is
 * started here. Figures only: nothing passes or fails.
 *
 *   pnpm --filter @ratewindow/bench redis-flood [-- --sizes 3000,30000 --keys 1,10000 --algorithms counter]
 *
 * With `--cluster`, the same floods on a 3-master Cluster started here, right after connecting (issue 32): for
 * each client library (ioredis, node-redis, Valkey GLIDE, each with its default options), one new Cluster client
 * per row (`--connections` for more), as an application has it: its groups see the whole flood; every node
 * without the scripts (SCRIPT FLUSH); the sliding window counter.
 *
 *   pnpm --filter @ratewindow/bench redis-flood -- --cluster [--clients ioredis,node-redis,valkey-glide]
 */
import { once } from 'node:events'
import {
  fixedWindow,
  RateLimiter,
  type RedisClient,
  RedisStore,
  slidingWindowCounter,
} from '@ratewindow/core'
import { GlideClusterClient, Logger } from '@valkey/valkey-glide'
import { Cluster, Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createCluster } from 'redis'
import { RedisClusterProcesses, RedisServer } from '../test/support/redis-server.js'
import { argument, table } from './stats.js'

const CONNECTIONS = 10
const LIMIT = 1_000

interface Row {
  admitted: number
  limited: number
  policy: number
  shed: number
  overLimitKeys: number
  ms: number
  heapMiB: number
}

const list = (name: string, fallback: string) => (argument(name) ?? fallback).split(',')

/**
 * `size` calls at once (`call(i)` for each `i`): their outcomes, the time until the last one answered, and the
 * growth of the heap meanwhile (sampled every 5,000 calls).
 */
async function flood<T>(
  size: number,
  call: (i: number) => Promise<T>,
): Promise<{ outcomes: T[]; ms: number; heapMiB: number }> {
  const heapBefore = process.memoryUsage().heapUsed
  let heapPeak = heapBefore
  const started = performance.now()
  const outcomes = await Promise.all(
    Array.from({ length: size }, (_, i) => {
      if (i % 5_000 === 0) heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)
      return call(i)
    }),
  )
  return { outcomes, ms: performance.now() - started, heapMiB: (heapPeak - heapBefore) / 2 ** 20 }
}

async function ours(
  clients: readonly RedisClient[],
  algorithm: 'counter' | 'fixed',
  size: number,
  keys: number,
  prefix: string,
): Promise<Row> {
  const rule =
    algorithm === 'counter'
      ? slidingWindowCounter({ limit: LIMIT, window: '1m' })
      : fixedWindow({ limit: LIMIT, window: '1m' })
  const limiters = clients.map(
    (client, i) =>
      new RateLimiter({
        rules: rule,
        store: new RedisStore({ client }),
        prefix,
        group: 'flood',
        name: `flood-${i}`,
        onError: () => {},
      }),
  )
  const { outcomes, ms, heapMiB } = await flood(size, (i) =>
    limiters[i % limiters.length]!.limit(`k${i % keys}`),
  )
  for (const limiter of limiters) limiter.release()
  const perKey = new Map<string, number>()
  const row: Row = { admitted: 0, limited: 0, policy: 0, shed: 0, overLimitKeys: 0, ms, heapMiB }
  for (const result of outcomes) {
    if (result.source === 'policy') row.policy++
    else if (result.source === 'shed') row.shed++
    else if (!result.allowed) row.limited++
    if (result.allowed) {
      row.admitted++
      perKey.set(result.key, (perKey.get(result.key) ?? 0) + 1)
    }
  }
  for (const count of perKey.values()) if (count > LIMIT) row.overLimitKeys++
  return row
}

async function flexible(clients: Redis[], size: number, keys: number, prefix: string): Promise<Row> {
  const limiters = clients.map(
    (storeClient) => new RateLimiterRedis({ storeClient, points: LIMIT, duration: 60, keyPrefix: prefix }),
  )
  const { outcomes, ms, heapMiB } = await flood(size, (i) =>
    limiters[i % CONNECTIONS]!.consume(`k${i % keys}`).then(
      () => true,
      (rejection: unknown) => (rejection instanceof Error ? 'error' : false),
    ),
  )
  const row: Row = { admitted: 0, limited: 0, policy: 0, shed: 0, overLimitKeys: 0, ms, heapMiB }
  for (const outcome of outcomes) {
    if (outcome === true) row.admitted++
    else if (outcome === false) row.limited++
    else row.policy++
  }
  return row
}

type Seeds = { host: string; port: number }[]

/** Each Cluster client with its library's default options, connected as an application's is before a request. */
const CLUSTER_CLIENTS: Record<string, (seeds: Seeds) => Promise<{ client: RedisClient; close(): unknown }>> =
  {
    ioredis: async (seeds) => {
      const client = new Cluster(seeds)
      client.on('error', () => {})
      await once(client, 'ready')
      return { client, close: () => client.disconnect() }
    },
    'node-redis': async (seeds) => {
      const client = createCluster({
        rootNodes: seeds.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      })
      client.on('error', () => {})
      await client.connect()
      return { client, close: () => client.destroy() }
    },
    'valkey-glide': async (seeds) => {
      const client = await GlideClusterClient.createClient({ addresses: seeds })
      return { client, close: () => client.close() }
    },
  }

/** The floods on a 3-master Cluster, right after connecting: one table, a row per client, keys and size. */
export async function runClusterFlood(): Promise<string> {
  Logger.setLoggerConfig('off') // GLIDE logs every NOSCRIPT reply on stdout
  const cluster = await RedisClusterProcesses.start(3)
  const rows: string[][] = []
  let run = 0
  try {
    for (const name of list('clients', Object.keys(CLUSTER_CLIENTS).join(','))) {
      for (const keys of list('keys', '1,10000').map(Number)) {
        for (const size of list('sizes', '30000,100000').map(Number)) {
          await Promise.all(cluster.nodes.map((node) => node.cli('script', 'flush')))
          const connected = await Promise.all(
            Array.from({ length: Number(argument('connections') ?? 1) }, () =>
              CLUSTER_CLIENTS[name]!(cluster.startupNodes),
            ),
          )
          try {
            const clients = connected.map((each) => each.client)
            rows.push(describe(name, keys, size, await ours(clients, 'counter', size, keys, `cf${run++}`)))
          } finally {
            await Promise.all(connected.map((each) => each.close()))
          }
        }
      }
    }
  } finally {
    await cluster.stop()
  }
  return floodTable('client', rows)
}

export async function runRedisFlood(): Promise<string> {
  const server = await RedisServer.start()
  const clients = Array.from(
    { length: CONNECTIONS },
    () => new Redis({ port: server.port, host: '127.0.0.1' }),
  )
  const rows: string[][] = []
  let run = 0
  try {
    for (const keys of list('keys', '1,10000').map(Number)) {
      for (const size of list('sizes', '3000,10000,30000,100000').map(Number)) {
        for (const algorithm of list('algorithms', 'counter,fixed') as ('counter' | 'fixed')[]) {
          const row = await ours(clients, algorithm, size, keys, `fl${run++}`)
          rows.push(
            describe(
              `ratewindow, ${algorithm === 'counter' ? 'sliding window counter' : 'fixed window'}`,
              keys,
              size,
              row,
            ),
          )
        }
        rows.push(
          describe('rate-limiter-flexible', keys, size, await flexible(clients, size, keys, `rlf${run++}`)),
        )
      }
    }
  } finally {
    for (const client of clients) client.disconnect()
    await server.stop()
  }
  return floodTable('limiter', rows)
}

/** The table of floods: `first` names what each row ran (a limiter, a client library). */
function floodTable(first: string, rows: string[][]): string {
  return table(
    [
      first,
      'keys',
      'concurrent',
      'admitted',
      'limit × keys',
      'keys over limit',
      'limited',
      'policy answers',
      'shed',
      'time',
      'heap growth',
    ],
    rows,
  )
}

/** One row of the table: what ran, on how many keys, how many calls at once, and what they were answered. */
function describe(name: string, keys: number, size: number, row: Row): string[] {
  return [
    name,
    keys.toLocaleString('en-US'),
    size.toLocaleString('en-US'),
    row.admitted.toLocaleString('en-US'),
    Math.min(size, LIMIT * keys).toLocaleString('en-US'),
    String(row.overLimitKeys),
    row.limited.toLocaleString('en-US'),
    row.policy.toLocaleString('en-US'),
    row.shed.toLocaleString('en-US'),
    `${row.ms.toFixed(0)} ms`,
    `${row.heapMiB.toFixed(0)} MiB`,
  ]
}

if (import.meta.url === `file://${process.argv[1]}`)
  console.log(process.argv.includes('--cluster') ? await runClusterFlood() : await runRedisFlood())
