// The store is chosen when the server starts (STORE=redis, REDIS_URL, PREFIX), so one build serves both.
import { RedisStore } from '@ratewindow/h3'
import { Redis } from 'ioredis'

export const redis =
  process.env.STORE === 'redis' ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 }) : undefined
const store = redis && new RedisStore({ client: redis, prefix: process.env.PREFIX })

/** The store options of a limiter named `prefix`: none (the default memory store) or the Redis store. */
export const storeFromEnv = (prefix) => (store === undefined ? { prefix } : { prefix, store, timeout: '10s' })

/** `skip` for a limiter of one route: every other path is skipped. */
export const only = (path) => (event) => event.path.split('?')[0] !== path

/** A Redis store on a port nobody listens on (DEAD_PORT): every call fails at once. */
export function deadStore() {
  const client = new Redis(Number(process.env.DEAD_PORT), '127.0.0.1', {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  client.on('error', () => {})
  return new RedisStore({ client })
}
