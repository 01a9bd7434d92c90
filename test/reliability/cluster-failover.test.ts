/**
 * A 3-master, 3-replica Redis Cluster started by the test, one per client: kill the master that owns a client's
 * slot; the replica is promoted and limiting continues, with no restart of the limiter. The promoted replica has
 * the script cached only if it ran it: whether or not, the next decision succeeds (EVAL on NOSCRIPT).
 */
import { ConcurrencyLimiter, fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_FAMILIES, type Connected, clientFamily } from '../support/redis-clients.js'
import { RedisClusterProcesses } from '../support/redis-server.js'

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
    let resumed = false
    let restarted = false
    for (let attempt = 0; attempt < 300 && !resumed; attempt++) {
      const result = await limiter.limit('client')
      sources.push(result.source)
      resumed = result.source === 'store'
      if (resumed) break
      if (!family.rediscoversAlone && !restarted && (await cluster.slotOwner(slot, survivor)) !== owner) {
        // This client keeps sending to the dead master until a node answers MOVED: the old master, back as a
        // replica of the promoted one, does.
        expect(sources.filter((source) => source === 'store')).toEqual([])
        await master.restart()
        restarted = true
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(resumed).toBe(true)
    expect(sources).toContain('policy') // answered by the policy during the failover, never hung
    expect(errors.length).toBeGreaterThan(0)
    // The promoted replica now serves the slot (the survivor may hear of it by gossip a moment after the client).
    let seenOwner = owner
    for (let attempt = 0; attempt < 100 && seenOwner === owner; attempt++) {
      seenOwner = await cluster.slotOwner(slot, survivor)
      if (seenOwner === owner) await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(seenOwner).not.toBe(owner)
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
    const store = new RedisStore({ client: connected.client })
    const prefix = 'failover-lease'
    const limiter = new ConcurrencyLimiter({
      limit: 1,
      lease: '1m',
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
    // Lease 1 minute: without the retried release the promoted replica would keep the slot taken for all of it.
    let back: Awaited<ReturnType<typeof limiter.acquire>> | undefined
    for (let attempt = 0; attempt < 300 && back === undefined; attempt++) {
      const each = await limiter.acquire('k')
      if (each.source === 'store' && each.allowed) back = each
      else await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(back).toMatchObject({ allowed: true, inFlight: 1 })
    expect(await limiter.acquire('k')).toMatchObject({ allowed: false, source: 'store', inFlight: 1 })
  })
})
