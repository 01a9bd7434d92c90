/**
 * An application process that takes in-flight leases on a real Redis and then hangs, holding them, until its
 * parent kills it. Started with child_process.fork by test/concurrency.test.ts; argv: port, prefix, key, count,
 * lease, clock (epoch ms the leases are taken at, or `server` for the Redis server's own time).
 */
import { ConcurrencyLimiter, RedisStore } from '@ratewindow/core'
import { Redis } from 'ioredis'

const [port, prefix = '', key = '', count, lease, clock] = process.argv.slice(2)
const client = new Redis({ host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: 1 })
const limiter = new ConcurrencyLimiter({
  limit: Number(count),
  lease: Number(lease),
  prefix,
  store: new RedisStore(clock === 'server' ? { client } : { client, clock: () => Number(clock) }),
  timeout: '30s',
})
let held = 0
for (let i = 0; i < Number(count); i++) if ((await limiter.acquire(key)).allowed) held++
process.send?.({ held })
// Hang with the leases held (never released): the parent kills this process.
setInterval(() => {}, 1_000)
