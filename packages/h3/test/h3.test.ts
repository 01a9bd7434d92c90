/**
 * `@ratewindow/h3` on h3 2 and h3 1 apps served by Node, on the memory store and on Redis: the answers every
 * adapter gives. Nitro's built server runs the same middleware in test/runtimes/nitro.test.ts.
 */
import { MemoryStore, RedisStore, type Store } from '@ratewindow/core'
import { rateLimit, slowDown } from '@ratewindow/h3'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { freePort } from '../../../test/runtimes/project.js'
import { standaloneClient, uniquePrefix } from '../../../test/support/redis.js'
import { MAJORS, served } from './apps.js'

const STORES = {
  memory: () => new MemoryStore(),
  redis: () => new RedisStore({ client: standaloneClient(), prefix: uniquePrefix() }),
} as const satisfies Record<string, () => Store>

const statuses = (responses: Response[]) => responses.map((response) => response.status)

describe.each(MAJORS)('%s', (major) => {
  describe.each(Object.keys(STORES) as (keyof typeof STORES)[])('on %s', (storeName) => {
    const store = STORES[storeName]

    it('200s with the RateLimit headers and event.context.rateLimit, then 429 with them, Retry-After and the body', async () => {
      const url = await served(major, rateLimit({ limit: 3, window: '1m', store: store() }))
      for (let call = 1; call <= 3; call++) {
        const response = await fetch(url)
        expect(response.status).toBe(200)
        expect(response.headers.get('ratelimit-remaining')).toBe(String(3 - call))
        expect(await response.json()).toEqual({ remaining: 3 - call })
      }
      const refused = await fetch(url)
      expect(refused.status).toBe(429)
      expect(refused.headers.get('ratelimit-limit')).toBe('3')
      expect(refused.headers.get('ratelimit-remaining')).toBe('0')
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(await refused.text()).toMatch(/too many requests/i)
    })

    it('a spoofed X-Forwarded-For without trust does not change the key; with trustProxy the entry the proxy wrote does', async () => {
      const untrusted = await served(major, rateLimit({ limit: 2, window: '1m', store: store() }))
      const spoofed = []
      for (let i = 0; i < 3; i++)
        spoofed.push(await fetch(untrusted, { headers: { 'x-forwarded-for': `198.51.100.${i}` } }))
      expect(statuses(spoofed)).toEqual([200, 200, 429])
      const trusted = await served(
        major,
        rateLimit({ limit: 2, window: '1m', trustProxy: 1, store: store() }),
      )
      const from = (client: string, claimed: string) =>
        fetch(trusted, { headers: { 'x-forwarded-for': `${claimed}, ${client}` } })
      const one = [await from('203.0.113.1', '10.0.0.1'), await from('203.0.113.1', '10.0.0.2')]
      expect(statuses([...one, await from('203.0.113.1', '10.0.0.3')])).toEqual([200, 200, 429])
      expect((await from('203.0.113.2', '203.0.113.1')).status).toBe(200)
    })

    it('60 concurrent requests at a limit of 20 admit exactly 20', async () => {
      const url = await served(major, rateLimit({ limit: 20, window: '1m', store: store() }))
      const answers = await Promise.all(Array.from({ length: 60 }, () => fetch(url)))
      expect(statuses(answers).filter((status) => status === 200)).toHaveLength(20)
      expect(statuses(answers).filter((status) => status === 429)).toHaveLength(40)
    })

    it('skipFailedRequests: failed responses are given back, successful ones count', async () => {
      const url = await served(
        major,
        rateLimit({ limit: 2, window: '1m', skipFailedRequests: true, store: store() }),
      )
      for (let i = 0; i < 4; i++) expect((await fetch(`${url}/status/503`)).status).toBe(503)
      expect(statuses([await fetch(`${url}/status/200`), await fetch(`${url}/status/200`)])).toEqual([
        200, 200,
      ])
      expect((await fetch(`${url}/status/200`)).status).toBe(429)
    })

    it('slowDown: the requests after delayAfter are delayed, with event.context.slowDown', async () => {
      const url = await served(
        major,
        slowDown({ windowMs: 3_600_000, delayAfter: 1, delayMs: 20, store: store() }), // an hour: no window ends within a test
      )
      expect(await (await fetch(url)).json()).toMatchObject({ slowDown: { used: 1, delay: 0 } })
      expect(await (await fetch(url)).json()).toMatchObject({ slowDown: { used: 2, delay: 20 } })
    })
  })

  it('a handler answering with Response.redirect (headers that cannot change) still gets the RateLimit headers', async () => {
    const handler = () => Response.redirect('http://127.0.0.1/slow-down', 303)
    const url = await served(major, rateLimit({ limit: 1, window: '1m', handler }))
    await fetch(url)
    const refused = await fetch(url, { redirect: 'manual' })
    expect([refused.status, refused.headers.get('location')]).toEqual([303, 'http://127.0.0.1/slow-down'])
    expect(refused.headers.get('ratelimit-remaining')).toBe('0')
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
  })

  it('the failure policy on a dead store: onStoreError allow serves, deny answers 503', async () => {
    const port = await freePort()
    const clients: Redis[] = []
    const dead = () => {
      const client = new Redis(port, '127.0.0.1', {
        lazyConnect: true,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      })
      client.on('error', () => {}) // refused, as the test wants
      clients.push(client)
      return new RedisStore({ client })
    }
    const quiet = { onError: () => {} }
    const open = await served(major, rateLimit({ limit: 1, store: dead(), onStoreError: 'allow', ...quiet }))
    expect(statuses([await fetch(open), await fetch(open)])).toEqual([200, 200])
    const closed = await served(major, rateLimit({ limit: 1, store: dead(), onStoreError: 'deny', ...quiet }))
    expect((await fetch(closed)).status).toBe(503)
    for (const client of clients) client.disconnect()
  })
})
