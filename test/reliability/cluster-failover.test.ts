/**
 * A 3-master, 3-replica Redis Cluster started by the test, one per client: kill the master that owns a client's
 * slot; the replica is promoted and limiting continues, with no restart of the limiter. The promoted replica has
 * the script cached only if it ran it: whether or not, the next decision succeeds (EVAL on NOSCRIPT).
 */
import { ConcurrencyLimiter, fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from '../support/connections.js'
import { CLIENT_FAMILIES, type Connected, clientFamily } from '../support/redis-clients.js'
import { CLUSTER_NODE_TIMEOUT_MS, RedisClusterProcesses } from '../support/redis-server.js'

/**
 * The bound on a failover as a client sees it: the master failing (node timeout), the election, the client's slot
 * refresh (ioredis every second, node-redis on MOVED), and for node-redis 5 the old master's restart; ten times
 * what an idle machine needs, for a machine busy with other tests.
 */
const FAILOVER_MS = 30_000

describe.each(CLIENT_FAMILIES)('RedisStore with $name on a Cluster during a failover', (family) => {
  let cluster: RedisClusterProcesses
  let connected: Connected

  beforeAll(async () => {
    cluster = await RedisClusterProcesses.start(3, 1)
    await cluster.waitForReplication() // every replica attached and in sync
    // The Cluster settings docs/redis.md recommends for this client: fail fast while a node is away.
    connected = await family.cluster(cluster.startupNodes)
  })
  afterAll(async () => {
    await connected?.close()
    await cluster?.stop()
  })

  it('keeps answering while the master is down, and limits again once its replica is promoted', async () => {
    const errors: unknown[] = []
    const store = new RedisStore({ client: connected.client })
    const rule = fixedWindow({ limit: 1_000, window: '1h' })
    const limiter = new RateLimiter({
      rules: rule,
      store,
      timeout: '300ms',
      onError: (error) => errors.push(error),
    })
    for (let i = 0; i < 5; i++) expect((await limiter.limit('client')).source).toBe('store')

    await cluster.waitForReplication()
    // Find and kill the master that owns the client's slot.
    const key = store.keyFor(limiter.namespace, 'client', rule)
    const slot = Number(await cluster.nodes[0]!.cli('cluster', 'keyslot', key))
    const owner = await cluster.slotOwner(slot)
    const master = cluster.nodes.find((node) => node.port === owner)!
    await master.kill('SIGKILL')

    const survivor = cluster.nodes.find((node) => node !== master)!
    const sources: string[] = []
    let restarted = false
    await until(
      async () => {
        const { source } = await limiter.limit('client')
        sources.push(source)
        if (source === 'store') return true
        if (!family.rediscoversAlone && !restarted && (await cluster.slotOwner(slot, survivor)) !== owner) {
          // This client keeps sending to the dead master until a node answers MOVED: the old master, back as a
          // replica of the promoted one, does.
          expect(sources.filter((each) => each === 'store')).toEqual([])
          await master.restart()
          restarted = true
        }
        return false
      },
      () => `${family.name} decides on the promoted replica (answers so far: ${sources.join(', ')})`,
      { within: FAILOVER_MS, every: 100 },
    )
    expect(sources).toContain('policy') // answered by the policy during the failover, never hung
    expect(errors.length).toBeGreaterThan(0)
    // The promoted replica now serves the slot (the survivor may hear of it by gossip a moment after the client).
    await until(
      async () => (await cluster.slotOwner(slot, survivor)) !== owner,
      `node ${survivor.port} sees a new owner of slot ${slot}`,
      { within: FAILOVER_MS, every: 50 },
    )
    // Counting resumed where the replica had it: the 5 before, replicated, and the decision that resumed. A
    // request the policy answered may have been counted too, once, if its command reached the new master later.
    const { remaining, source } = await limiter.peek('client', { cost: 0 })
    expect(source).toBe('store')
    expect(remaining).toBeLessThanOrEqual(1_000 - 6)
    expect(remaining).toBeGreaterThanOrEqual(1_000 - 6 - sources.filter((s) => s === 'policy').length)
  })
})

describe('ConcurrencyLimiter on a Cluster during a failover (ioredis 5)', () => {
  let cluster: RedisClusterProcesses
  let connected: Connected

  beforeAll(async () => {
    cluster = await RedisClusterProcesses.start(3, 1)
    await cluster.waitForReplication()
    connected = await clientFamily('ioredis 5').cluster(cluster.startupNodes)
  })
  afterAll(async () => {
    await connected?.close()
    await cluster?.stop()
  })

  it('a release sent while the master is down is tried again: the slot is back once the promoted replica answers, and the limit holds', async () => {
    const errors: unknown[] = []
    // The store's clock stands still: a lease never runs out during the test, so the slot can only come back by
    // its release (on the server's clock it would come back after the lease even if the release were lost).
    const now = Date.now()
    const store = new RedisStore({ client: connected.client, clock: () => now })
    const prefix = 'failover-lease'
    const lease = 60_000
    const limiter = new ConcurrencyLimiter({
      limit: 1,
      lease,
      store,
      prefix,
      onStoreError: 'deny',
      timeout: '300ms',
      onError: (error) => errors.push(error),
    })
    const slot = await limiter.acquire('k')
    expect(slot).toMatchObject({ allowed: true, source: 'store' })
    await cluster.waitForReplication() // the replica holds the lease
    const key = store.leaseKeyFor(prefix, 'k')
    const hashSlot = Number(await cluster.nodes[0]!.cli('cluster', 'keyslot', key))
    const owner = await cluster.slotOwner(hashSlot)
    await cluster.nodes.find((node) => node.port === owner)!.kill('SIGKILL')

    await slot.release() // the master is gone: fails, reported, and tried again in the background
    expect(errors.length).toBeGreaterThan(0)
    // The limiter retries the release until its lease would have run out: that, and the failover, bound the wait.
    let back: Awaited<ReturnType<typeof limiter.acquire>> | undefined
    await until(
      async () => {
        const each = await limiter.acquire('k')
        if (each.source === 'store' && each.allowed) back = each
        return back !== undefined
      },
      'the promoted replica gives the slot back (the retried release reaches it)',
      { within: lease + CLUSTER_NODE_TIMEOUT_MS, every: 100 },
    )
    expect(back).toMatchObject({ allowed: true, inFlight: 1 })
    expect(await limiter.acquire('k')).toMatchObject({ allowed: false, source: 'store', inFlight: 1 })
  })
})
