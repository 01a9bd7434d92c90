/**
 * The Redis store for the example and a way to close its client, or none (memory) without a URL. REDIS_CLIENT picks the client: `ioredis`
 * (default) or `node-redis`, each with settings that never hang a request (docs/redis.md).
 */
import { RedisStore } from '@ratewindow/hono'
import { Redis } from 'ioredis'
import { createClient } from 'redis'

export async function redisStore(
  url: string | undefined,
  kind = process.env.REDIS_CLIENT ?? 'ioredis',
): Promise<{ store: RedisStore; quit(): Promise<unknown> } | undefined> {
  if (!url) return undefined
  if (kind === 'ioredis') {
    // Fail fast while disconnected; never resend a script after a reconnect (it would count twice).
    const client = new Redis(url, {
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      lazyConnect: true,
    })
    // Connected before the app serves: without an offline queue, earlier requests would find no store.
    await client.connect()
    return { store: new RedisStore({ client }), quit: () => client.quit() }
  }
  if (kind === 'node-redis') {
    const client = createClient({
      url,
      disableOfflineQueue: true,
      socket: { connectTimeout: 1_000, reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 1_000) },
    })
    client.on('error', (error: Error) => console.error('redis:', error.message))
    await client.connect()
    return { store: new RedisStore({ client }), quit: () => client.quit() }
  }
  throw new Error(`REDIS_CLIENT must be ioredis or node-redis; received ${kind}`)
}
