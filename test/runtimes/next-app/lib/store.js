// The store is chosen when the server starts (STORE=redis, REDIS_URL, PREFIX), so one build serves both.
import { RedisStore } from '@ratewindow/next'
import { Redis } from 'ioredis'

let store

/**
 * The store options of a limiter named `prefix`: none (the default memory store) or the Redis store, with a
 * timeout that a first call on a connecting client meets on a loaded machine.
 */
export function storeFromEnv(prefix) {
  if (process.env.STORE !== 'redis') return { prefix }
  store ??= new RedisStore({
    client: new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 }),
    prefix: process.env.PREFIX,
  })
  return { prefix, store, timeout: '10s' }
}
