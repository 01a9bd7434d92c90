/**
 * Issue 35, item 2: `GET /limiters/:limiter/top?count=&scan=` (core's `overrides.top`) through a real Express
 * server, on MemoryStore and on a real Redis, standalone and the 3-master Cluster: the 10 most limited of 1,200
 * keys, raw where an override record holds the key; bounded parameters, 4xx JSON on bad ones.
 */
import { fixedWindow, MemoryStore, RateLimiter, RedisStore, type Store } from '@ratewindow/core'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { clusterClient, forgetPrefix, redisEnvironment } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { adminHandler } from '../src/index.js'
import { MOUNTS } from './apps.js'

const TOKEN = 'test-token'
const BASE = '/_ratewindow'
const cleanups: (() => Promise<void> | void)[] = []
/** The database of the standalone server these tests write in. */
const TOP_DB = 1

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

async function start(store: Store, overrides = true) {
  const api = new RateLimiter({
    rules: fixedWindow({ limit: 100, window: '1h', name: 'per-hour' }),
    store,
    name: 'api',
    overrides,
    // A scan reads many keys; on a loaded machine a Cluster read may pass the default 250 ms (not what is tested).
    timeout: '5s',
  })
  cleanups.push(() => api.release())
  const handler = adminHandler({
    limiters: [api],
    authorize: (request) => request.headers.get('authorization') === `Bearer ${TOKEN}`,
    basePath: BASE,
  })
  const app = await MOUNTS.Express!(api, handler)
  cleanups.push(() => app.close())
  const admin = async (path: string) => {
    const response = await fetch(`${app.url}${BASE}${path}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    expect(response.headers.get('content-type')).toMatch(/^application\/json/)
    return { status: response.status, body: await response.json() }
  }
  return { api, admin }
}

/**
 * The stores, each Redis one under a prefix of its own, forgotten after the test; on one server, in a database of
 * its own too (the endpoint's tests read one SCAN page of database 0 at the same time).
 */
const stores: Record<string, () => Store> = {
  MemoryStore: () => new MemoryStore(),
  'RedisStore (standalone)': () => {
    const prefix = uniquePrefix()
    const { standalonePort } = redisEnvironment()
    const client = new Redis({ host: '127.0.0.1', port: standalonePort, db: TOP_DB, maxRetriesPerRequest: 1 })
    cleanups.push(async () => {
      client.disconnect()
      await forgetPrefix([standalonePort], prefix, TOP_DB)
    })
    return new RedisStore({ client, prefix })
  },
  'RedisStore (Cluster)': () => {
    const prefix = uniquePrefix()
    cleanups.push(() =>
      forgetPrefix(
        redisEnvironment().clusterNodes.map((node) => node.port),
        prefix,
      ),
    )
    return new RedisStore({ client: clusterClient(), prefix })
  },
}

describe.each(Object.keys(stores))('GET /limiters/:limiter/top with %s', (name) => {
  it('the 10 most limited of 1,200 keys, the raw key where a record holds it', async () => {
    const { api, admin } = await start(stores[name]!())
    const keys = Array.from({ length: 1200 }, (_, i) => `client-${i}`)
    for (let at = 0; at < keys.length; at += 400)
      await Promise.all(keys.slice(at, at + 400).map((key) => api.limit(key)))
    const most = keys.filter((_, i) => i % 113 === 7).slice(0, 10)
    for (const [i, key] of most.entries()) await api.overrides.take(key, 20 + i)
    // A record holds the raw key of the most limited one: shown raw even on Redis.
    await api.overrides.set(most[9]!, { limit: 100 })

    const top = await admin('/limiters/api/top?count=10&scan=10000')
    expect(top.status).toBe(200)
    expect(top.body.scanned).toBe(1201)
    expect(top.body.keys).toHaveLength(10)
    expect(top.body.keys[0]).toEqual({ key: most[9], rule: 'per-hour', used: 30, limit: 100, remaining: 70 })
    const rest = top.body.keys.slice(1).map((row: { key: string }) => row.key)
    const ranked = await api.overrides.top({ count: 10 })
    expect(rest).toEqual(ranked.keys.slice(1).map((row) => row.key))
    expect(ranked.keys.slice(1).map((row) => row.used)).toEqual([29, 28, 27, 26, 25, 24, 23, 22, 21])
    if (name === 'MemoryStore') expect(rest).toEqual(most.slice(0, 9).reverse())

    expect((await admin('/limiters/api/top')).body.keys).toHaveLength(10)
    expect((await admin('/limiters/api/top?scan=100')).body).toMatchObject({ scanned: 100 })
  })
})

describe('GET /limiters/:limiter/top: parameters', () => {
  it('4xx JSON naming the parameter on bad ones; 404 for a store that cannot be scanned', async () => {
    const { admin } = await start(new MemoryStore())
    for (const query of ['count=0', 'count=1001', 'count=ten', 'scan=0', 'scan=1000001', 'scan=-5']) {
      const answer = await admin(`/limiters/api/top?${query}`)
      expect(answer.status, query).toBe(400)
      expect(answer.body.error.message, query).toContain(`\`${query.split('=')[0]}\``)
    }
    expect((await admin('/limiters/api/top?sacn=5')).status).toBe(400)
    expect((await admin('/limiters/nobody/top')).status).toBe(404)

    const inner = new MemoryStore()
    cleanups.push(() => inner.close())
    const plain: Store = {
      consume: (request) => inner.consume(request),
      peek: (request) => inner.peek(request),
      refund: (request) => inner.refund(request),
      reset: (target) => inner.reset(target),
    }
    const other = await start(plain, false)
    const refused = await other.admin('/limiters/api/top')
    expect(refused.status).toBe(404)
    expect(refused.body.error).toMatchObject({ code: 'ERR_RATEWINDOW_NOT_FOUND' })
  })
})
