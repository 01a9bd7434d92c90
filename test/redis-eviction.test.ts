import { fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import type { Cluster, Redis } from 'ioredis'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { clusterClient, standaloneClient } from './support/redis.js'
import { RedisServer } from './support/redis-server.js'

const servers: RedisServer[] = []
afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()))
})
afterEach(() => {
  vi.useRealTimers()
})

async function serverWith(policy: string): Promise<Redis> {
  const server = await RedisServer.start(['--maxmemory', '8mb', '--maxmemory-policy', policy])
  servers.push(server)
  return standaloneClient(server.port)
}

/** A limiter of 1 per hour on `client`, and the errors its onError received. */
function limiterOn(client: Redis | Cluster) {
  const errors: Error[] = []
  const store = new RedisStore({ client })
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 1, window: '1h' }),
    store,
    prefix: 'ev',
    onError: (error) => errors.push(error as Error),
  })
  return { store, limiter, errors }
}

/** Decisions until onError has received `count` errors (the watch reads INFO in the background). */
async function decideUntil(limiter: RateLimiter, errors: Error[], count: number): Promise<void> {
  for (let i = 0; i < 20 && errors.length < count; i++) await limiter.limit(`probe-${i}`)
}

/** Writes values without TTL, 64 KB then 512 B, until `stop` says so or Redis refuses the small ones (OOM). */
async function fillMemory(client: Redis, stop: () => Promise<boolean>): Promise<void> {
  for (const size of [65_536, 512]) {
    const value = 'x'.repeat(size)
    for (let i = 0; i < 20_000 && !(await stop()); i++) {
      try {
        await client.set(`junk:${size}:${i}`, value)
      } catch {
        break
      }
    }
  }
}

describe('Redis eviction is reported', () => {
  it('volatile-lru: the policy is reported at first use; an eviction resets a limit and is reported too', async () => {
    const client = await serverWith('volatile-lru')
    const { store, limiter, errors } = limiterOn(client)
    expect((await limiter.limit('victim')).allowed).toBe(true)
    expect((await limiter.limit('victim')).allowed).toBe(false)
    await decideUntil(limiter, errors, 1)
    expect(errors).toHaveLength(1)
    expect(errors[0]!.message).toMatch(/maxmemory-policy volatile-lru: under memory pressure it evicts/)
    // volatile-lru evicts only keys with a TTL: ours, never the junk.
    const key = store.keyFor(limiter.namespace, 'victim', limiter.rules[0]!)
    await fillMemory(client, async () => (await client.exists(key)) === 0)
    expect(await client.exists(key)).toBe(0)
    // What eviction does to a limit: the client starts afresh.
    expect((await limiter.limit('victim')).allowed).toBe(true)
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(Date.now() + 61_000)
    await decideUntil(limiter, errors, 2)
    expect(errors).toHaveLength(2)
    expect(errors[1]!.message).toMatch(/evicted \d+ keys since the previous check/)
  })

  it('allkeys-lru is reported; noeviction is not, and Redis refuses writes instead', async () => {
    const lru = limiterOn(await serverWith('allkeys-lru'))
    await lru.limiter.limit('k')
    await decideUntil(lru.limiter, lru.errors, 1)
    expect(lru.errors[0]?.message).toMatch(/maxmemory-policy allkeys-lru/)

    const client = await serverWith('noeviction')
    const quiet = limiterOn(client)
    for (let i = 0; i < 5; i++) await quiet.limiter.limit('k')
    expect(quiet.errors).toEqual([])
    await fillMemory(client, async () => false)
    // Where the fill stopped, memory sits at the limit and may drop just below it again (freed buffers);
    // a limit under what is in use makes the full memory certain.
    const used = Number(/used_memory:(\d+)/.exec(await client.info('memory'))![1])
    await client.config('SET', 'maxmemory', String(Math.floor(used / 2)))
    // Full memory under noeviction: the script's writes fail, the failure policy answers and says why.
    const result = await quiet.limiter.limit('fresh-client')
    expect(result.source).toBe('policy')
    expect(String(quiet.errors[0])).toMatch(/OOM/)
  })

  it('on a Cluster every master is read', async () => {
    const client = clusterClient()
    const { limiter, errors } = limiterOn(client)
    await limiter.limit('k')
    const masters = client.nodes('master')
    try {
      await Promise.all(
        masters.map(async (node) => {
          await node.config('SET', 'maxmemory', '1gb')
          await node.config('SET', 'maxmemory-policy', 'allkeys-lfu')
        }),
      )
      const fresh = limiterOn(client)
      await decideUntil(fresh.limiter, fresh.errors, masters.length)
      expect(fresh.errors).toHaveLength(masters.length)
      for (const error of fresh.errors) expect(error.message).toMatch(/maxmemory-policy allkeys-lfu/)
    } finally {
      await Promise.all(
        masters.map(async (node) => {
          await node.config('SET', 'maxmemory-policy', 'noeviction')
          await node.config('SET', 'maxmemory', '0')
        }),
      )
    }
    expect(errors).toEqual([])
  })
})
