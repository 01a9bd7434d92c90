/**
 * Redis memory per key for each algorithm, measured with MEMORY USAGE after filling one key to its limit.
 * Run: pnpm --filter @ratewindow/bench redis-memory
 */
import {
  fixedWindow,
  gcra,
  RateLimiter,
  RedisStore,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { table } from './stats.js'

const factories: [string, (limit: number) => Rule][] = [
  ['fixed-window', (limit) => fixedWindow({ limit, window: '1h' })],
  ['sliding-window-counter', (limit) => slidingWindowCounter({ limit, window: '1h' })],
  ['sliding-window-log', (limit) => slidingWindowLog({ limit, window: '1h' })],
  ['token-bucket', (limit) => tokenBucket({ capacity: limit, refillRate: 1, interval: '1h' })],
  ['gcra', (limit) => gcra({ limit: 1, window: '1h', burst: limit })],
]

// A second server with a larger listpack threshold shows the compact encoding for big logs.
const listpackArgs = process.argv.includes('--listpack-1024') ? ['--zset-max-listpack-entries', '1024'] : []
const server = await RedisServer.start(listpackArgs)
try {
  const client = new Redis({ port: server.port, host: '127.0.0.1' })
  const store = new RedisStore({ client })
  const rows: string[][] = []
  for (const [name, make] of factories) {
    const row = [name]
    for (const limit of [10, 1_000]) {
      const rule = make(limit)
      // Spread over 1 s of client time so the log's members are realistic (distinct timestamps).
      let now = 1_700_000_000_000
      const timed = new RateLimiter({
        rules: rule,
        prefix: 'mem',
        store: new RedisStore({ client, clock: () => now++ }),
      })
      for (let i = 0; i < limit; i++) await timed.limit(`user-${limit}`)
      const bytes = Number(
        await client.memory('USAGE', store.keyFor(timed.namespace, `user-${limit}`, rule), 'SAMPLES', '0'),
      )
      row.push(String(bytes), name === 'sliding-window-log' ? (bytes / limit).toFixed(1) : '-')
    }
    rows.push(row)
  }
  console.log(
    `MEMORY USAGE per key on redis-server ${(await client.info('server')).match(/redis_version:(\S+)/)?.[1]} ${listpackArgs.join(' ')}, key filled to its limit\n`,
  )
  console.log(table(['algorithm', 'limit 10 (bytes)', 'per entry', 'limit 1000 (bytes)', 'per entry'], rows))
  await client.quit()
} finally {
  await server.stop()
}
