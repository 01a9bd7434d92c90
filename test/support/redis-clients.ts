/**
 * Every Redis client family RedisStore supports, each able to connect to a standalone server or a Cluster with
 * the settings docs/redis.md recommends (fail fast, never resend a script). The libraries are imported
 * statically: a missing one fails the test files that use this module, never skips them.
 */
import type { RedisClient } from '@ratewindow/core'
import { GlideClient, GlideClusterClient, Logger } from '@valkey/valkey-glide'
import { Redis as Ioredis5, Cluster as Ioredis5Cluster } from 'ioredis'
import { Redis as Ioredis6, Cluster as Ioredis6Cluster } from 'ioredis6'
import { Redis as Iovalkey, Cluster as IovalkeyCluster } from 'iovalkey'
import { createClient as createNodeRedis6, createCluster as createNodeRedis6Cluster } from 'redis'
import { createClient as createNodeRedis5, createCluster as createNodeRedis5Cluster } from 'redis5'
import { afterAll } from 'vitest'

export interface Address {
  host: string
  port: number
}

/** A connected client and how to let it go. */
export interface Connected {
  client: RedisClient
  close(): Promise<void>
}

export interface ClientFamily {
  /** Shown in test names and figures, e.g. `ioredis 5`. */
  name: string
  /** Connects to a standalone server and resolves once commands can be sent; commands time out after `timeoutMs`. */
  standalone(port: number, timeoutMs?: number): Promise<Connected>
  /** Connects to a Cluster through its seed nodes and resolves once commands can be sent. */
  cluster(seeds: readonly Address[]): Promise<Connected>
  /**
   * Whether the Cluster client finds a promoted replica by itself after its master dies. node-redis 5 does not:
   * it learns the new layout only from a MOVED reply. @default true
   */
  rediscoversAlone?: boolean
}

const HOST = '127.0.0.1'
const ignore = () => {} // connection errors during outages are expected; the limiter reports its own failures

/** What the test needs of an ioredis-like client beside the store's part: events and disconnect. */
type IoredisLike = RedisClient & {
  once(event: string, listener: (...args: unknown[]) => void): unknown
  on(event: string, listener: (...args: unknown[]) => void): unknown
  disconnect(): void
}
const ioredisOptions = {
  maxRetriesPerRequest: 0,
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  connectTimeout: 500,
  retryStrategy: () => 50,
}
const ioredisClusterOptions = {
  redisOptions: ioredisOptions,
  enableOfflineQueue: false,
  clusterRetryStrategy: () => 100,
  slotsRefreshTimeout: 500,
  slotsRefreshInterval: 1_000,
}

/** ioredis 5, ioredis 6 and iovalkey share one API; `make` builds the client with the options above. */
function ioredisFamily(
  name: string,
  make: { standalone(port: number, timeoutMs?: number): IoredisLike; cluster(seeds: Address[]): IoredisLike },
): ClientFamily {
  const connected = async (client: IoredisLike) => {
    client.on('error', ignore)
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve())
      client.once('end', () => reject(new Error(`${name} could not connect`)))
    })
    return { client, close: async () => client.disconnect() }
  }
  return {
    name,
    standalone: (port, timeoutMs) => connected(make.standalone(port, timeoutMs)),
    cluster: (seeds) => connected(make.cluster([...seeds])),
  }
}

/** What the test needs of a node-redis client or cluster beside the store's part. */
type NodeRedisLike = RedisClient & {
  on(event: 'error', listener: (error: Error) => void): unknown
  connect(): Promise<unknown>
  destroy(): unknown
}
const nodeRedisOptions = {
  disableOfflineQueue: true,
  socket: { connectTimeout: 500, reconnectStrategy: () => 50 },
}

/** node-redis 5 and 6 share one API; `make` builds the client with the options above. */
function nodeRedisFamily(
  name: string,
  make: {
    standalone(url: string, timeoutMs?: number): NodeRedisLike
    cluster(urls: string[]): NodeRedisLike
  },
  rediscoversAlone = true,
): ClientFamily {
  const connected = async (client: NodeRedisLike) => {
    client.on('error', ignore)
    await client.connect()
    return { client, close: async () => void client.destroy() }
  }
  return {
    name,
    rediscoversAlone,
    standalone: (port, timeoutMs) => connected(make.standalone(`redis://${HOST}:${port}`, timeoutMs)),
    cluster: (seeds) => connected(make.cluster(seeds.map((seed) => `redis://${seed.host}:${seed.port}`))),
  }
}

const glide: ClientFamily = {
  name: 'valkey-glide',
  standalone: async (port, timeoutMs = 500) => {
    const client = await GlideClient.createClient({
      addresses: [{ host: HOST, port }],
      requestTimeout: timeoutMs,
    })
    return { client, close: async () => client.close() }
  },
  cluster: async (seeds) => {
    const client = await GlideClusterClient.createClient({ addresses: [...seeds], requestTimeout: 500 })
    return { client, close: async () => client.close() }
  },
}
// GLIDE logs every error reply (NOSCRIPT included) as a warning on stdout by default.
Logger.setLoggerConfig('off')

export const IOREDIS_5 = ioredisFamily('ioredis 5', {
  standalone: (port, commandTimeout) => new Ioredis5({ host: HOST, port, ...ioredisOptions, commandTimeout }),
  cluster: (seeds) => new Ioredis5Cluster(seeds, ioredisClusterOptions),
})
export const NODE_REDIS_6 = nodeRedisFamily('node-redis 6', {
  standalone: (url, timeout) => createNodeRedis6({ url, ...nodeRedisOptions, commandOptions: { timeout } }),
  cluster: (urls) =>
    createNodeRedis6Cluster({ rootNodes: urls.map((url) => ({ url })), defaults: nodeRedisOptions }),
})

/** Every supported client family, the most used first. */
export const CLIENT_FAMILIES: readonly ClientFamily[] = [
  IOREDIS_5,
  ioredisFamily('ioredis 6', {
    standalone: (port, commandTimeout) =>
      new Ioredis6({ host: HOST, port, ...ioredisOptions, commandTimeout }),
    cluster: (seeds) => new Ioredis6Cluster(seeds, ioredisClusterOptions),
  }),
  ioredisFamily('iovalkey', {
    standalone: (port, commandTimeout) =>
      new Iovalkey({ host: HOST, port, ...ioredisOptions, commandTimeout }),
    cluster: (seeds) => new IovalkeyCluster(seeds, ioredisClusterOptions),
  }),
  NODE_REDIS_6,
  nodeRedisFamily(
    'node-redis 5',
    {
      standalone: (url, timeout) =>
        createNodeRedis5({ url, ...nodeRedisOptions, commandOptions: { timeout } }),
      cluster: (urls) =>
        createNodeRedis5Cluster({ rootNodes: urls.map((url) => ({ url })), defaults: nodeRedisOptions }),
    },
    false,
  ),
  glide,
]

/** The family named `name`, e.g. `node-redis 5`. */
export function clientFamily(name: string): ClientFamily {
  const family = CLIENT_FAMILIES.find((candidate) => candidate.name === name)
  if (family === undefined) throw new Error(`no client family named ${name}`)
  return family
}

const open: Connected[] = []

/**
 * Connects `family` to a standalone server (commands timing out after `timeoutMs`, if given) or a Cluster; the
 * client is closed after the file's tests.
 */
export async function connect(
  family: ClientFamily,
  target: number | readonly Address[],
  timeoutMs?: number,
): Promise<RedisClient> {
  const connected =
    typeof target === 'number' ? await family.standalone(target, timeoutMs) : await family.cluster(target)
  open.push(connected)
  return connected.client
}

afterAll(async () => {
  await Promise.all(open.splice(0).map((connected) => connected.close().catch(ignore)))
})
