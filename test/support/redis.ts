import { Cluster, Redis } from 'ioredis'
import { afterAll, inject } from 'vitest'

/** The shared test servers. Throws (so the test fails, never skips) when Redis is not installed. */
export function redisEnvironment(): {
  standalonePort: number
  clusterNodes: { host: string; port: number }[]
} {
  const environment = inject('redis')
  if (environment.error || !environment.standalonePort || !environment.clusterNodes) {
    throw new Error(environment.error ?? 'the Redis test servers did not start')
  }
  return { standalonePort: environment.standalonePort, clusterNodes: environment.clusterNodes }
}

const run = Math.random().toString(36).slice(2, 8)
let prefixes = 0
/** A key prefix no other test, file or process uses on the shared servers. */
export const uniquePrefix = (): string => `ro${run}x${prefixes++}x`

const clients: (Redis | Cluster)[] = []

/** An ioredis client for the shared standalone server (or `port`), closed after the file's tests. */
export function standaloneClient(port = redisEnvironment().standalonePort): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    maxRetriesPerRequest: 1,
    autoResendUnfulfilledCommands: false,
  })
  clients.push(client)
  return client
}

/** An ioredis Cluster client for the shared cluster (or `nodes`), closed after the file's tests. */
export function clusterClient(nodes = redisEnvironment().clusterNodes): Cluster {
  const client = new Cluster(nodes, {
    redisOptions: { maxRetriesPerRequest: 1, autoResendUnfulfilledCommands: false },
  })
  clients.push(client)
  return client
}

afterAll(async () => {
  await Promise.all(clients.splice(0).map((client) => client.quit().catch(() => client.disconnect())))
})

/**
 * Deletes the keys under `prefix` (a unique test prefix) on each server: a test that writes thousands of keys leaves
 * the shared servers' keyspace (database `db`) as small as it found it, for the tests that read one page of a SCAN.
 */
export async function forgetPrefix(ports: readonly number[], prefix: string, db = 0): Promise<void> {
  for (const port of ports) {
    const client = new Redis({ host: '127.0.0.1', port, db, maxRetriesPerRequest: 1 })
    try {
      let cursor = '0'
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
        cursor = next
        // One key a command: on a Cluster node, the keys of one step are of many slots.
        if (keys.length > 0) await client.pipeline(keys.map((key) => ['unlink', key])).exec()
      } while (cursor !== '0')
    } finally {
      client.disconnect()
    }
  }
}
