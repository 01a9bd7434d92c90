/**
 * A 3-master, 3-replica Redis Cluster started by the test: kill the master that owns a client's slot; the
 * replica is promoted and limiting continues, with no restart of the limiter.
 */
import { once } from 'node:events'
import { fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RedisClusterProcesses } from '../support/redis-server.js'

describe('RedisStore on a Cluster during a failover', () => {
  let cluster: RedisClusterProcesses
  let client: Cluster

  beforeAll(async () => {
    cluster = await RedisClusterProcesses.start(3, 1)
    // The Cluster settings docs/operations.md recommends: fail fast while a node is away, refresh slots often.
    client = new Cluster(cluster.startupNodes, {
      redisOptions: { maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false, connectTimeout: 500 },
      enableOfflineQueue: false,
      clusterRetryStrategy: () => 100,
      slotsRefreshTimeout: 500,
      slotsRefreshInterval: 1_000,
    })
    client.on('error', () => {}) // node errors are expected here; the limiter reports its own failures
    await once(client, 'ready')
  })
  afterAll(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  it('keeps answering while the master is down, and limits again once its replica is promoted', async () => {
    const errors: unknown[] = []
    const store = new RedisStore({ client })
    const rule = fixedWindow({ limit: 1_000, window: '1h' })
    const limiter = new RateLimiter({
      rules: rule,
      store,
      timeout: '300ms',
      onError: (error) => errors.push(error),
    })
    for (let i = 0; i < 5; i++) expect((await limiter.limit('client')).source).toBe('store')

    // Find and kill the master that owns the client's slot.
    const slot = Number(await client.cluster('KEYSLOT', store.keyFor('rw', 'client', rule)))
    const owner = await slotOwner(client, slot)
    const master = cluster.nodes.find((node) => node.port === owner)!
    await master.kill('SIGKILL')

    const sources: string[] = []
    let resumed = false
    for (let attempt = 0; attempt < 300 && !resumed; attempt++) {
      const result = await limiter.limit('client')
      sources.push(result.source)
      resumed = result.source === 'store'
      if (!resumed) await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(resumed).toBe(true)
    expect(sources).toContain('policy') // answered by the policy during the failover, never hung
    expect(errors.length).toBeGreaterThan(0)
    expect(await slotOwner(client, slot)).not.toBe(owner) // the promoted replica now serves the slot
  })
})

/** The port of the master serving `slot`, from CLUSTER SLOTS. */
async function slotOwner(client: Cluster, slot: number): Promise<number> {
  const ranges = await client.cluster('SLOTS')
  const range = ranges.find(([from, to]) => slot >= from && slot <= to)
  if (!range) throw new Error(`no node serves slot ${slot}`)
  return range[2]![1]
}
