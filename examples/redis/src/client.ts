/**
 * The Redis client for the example, with settings that never hang a request (docs/redis.md): REDIS_CLIENT picks
 * `ioredis` (default), `node-redis` or `valkey-glide`; REDIS_URL a standalone server (default
 * redis://127.0.0.1:6379); REDIS_CLUSTER comma-separated host:port seeds of a Cluster instead.
 */
import type { RedisClient } from '@ratewindow/core'
import { GlideClient, GlideClusterClient } from '@valkey/valkey-glide'
import { Cluster, Redis } from 'ioredis'
import { createClient, createCluster } from 'redis'

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const seeds = process.env.REDIS_CLUSTER?.split(',').map((seed) => {
  const [host = '127.0.0.1', port = '6379'] = seed.split(':')
  return { host, port: Number(port) }
})

export async function connectRedis(kind = process.env.REDIS_CLIENT ?? 'ioredis'): Promise<RedisClient> {
  switch (kind) {
    case 'ioredis': {
      // Fail fast while disconnected; never resend a script after a reconnect (it would count twice).
      const options = { maxRetriesPerRequest: 1, autoResendUnfulfilledCommands: false, commandTimeout: 500 }
      return seeds
        ? new Cluster(seeds, { enableOfflineQueue: false, redisOptions: options })
        : new Redis(url, { ...options, enableOfflineQueue: false })
    }
    case 'node-redis': {
      const options = {
        disableOfflineQueue: true,
        socket: {
          connectTimeout: 1_000,
          reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 1_000),
        },
      }
      const client = seeds
        ? createCluster({
            rootNodes: seeds.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
            defaults: options,
          })
        : createClient({ url, ...options })
      client.on('error', (error) => console.error('redis:', error.message))
      await client.connect()
      return client
    }
    case 'valkey-glide': {
      const { hostname, port } = new URL(url)
      return seeds
        ? GlideClusterClient.createClient({ addresses: seeds, requestTimeout: 500 })
        : GlideClient.createClient({
            addresses: [{ host: hostname, port: Number(port || 6379) }],
            requestTimeout: 500,
          })
    }
    default:
      throw new Error(`REDIS_CLIENT must be ioredis, node-redis or valkey-glide; received ${kind}`)
  }
}
