// The store is chosen when the server starts (STORE=redis, REDIS_URL, PREFIX), so one build serves both.
import { RedisStore } from '@ratewindow/sveltekit'
import { Redis } from 'ioredis'

let store
let client

// adapter-node's signal that the server stopped taking requests: the Redis client goes, so the process can end.
process.on('sveltekit:shutdown', () => {
  client?.quit()
})

/** The store options of a limiter named `prefix`: none (the default memory store) or the Redis store. */
export function storeFromEnv(prefix) {
  if (process.env.STORE !== 'redis') return { prefix }
  client ??= new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 })
  store ??= new RedisStore({ client, prefix: process.env.PREFIX })
  return { prefix, store, timeout: '10s' }
}

let dead

/** A Redis store on a port nobody listens on (DEAD_PORT): every call fails at once. */
export function deadStore() {
  if (dead !== undefined) return dead
  const client = new Redis(Number(process.env.DEAD_PORT), '127.0.0.1', {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  client.on('error', () => {}) // refused, as the test wants
  dead = new RedisStore({ client })
  return dead
}
