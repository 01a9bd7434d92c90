/**
 * Issue 35, item 3: a scripted sequence of requests to a real app (Express, Fastify; MemoryStore, RedisStore), then
 * a scrape of its `/metrics`, parsed from the exposition text.
 */
import type { AddressInfo } from 'node:net'
import {
  fixedWindow,
  gcra,
  type LimiterOverrides,
  MemoryStore,
  type RateLimitObserver,
  RedisStore,
  type Store,
} from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import express from 'express'
import fastify from 'fastify'
import { Redis } from 'ioredis'
import { Registry } from 'prom-client'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'
import { RedisServer } from '../../../test/support/redis-server.js'
import { prometheusMetrics } from '../src/index.js'

/** The limiters of the app: one per route. */
const API = { rules: fixedWindow({ limit: 10, window: '1m', name: 'per-minute' }), name: 'api' }
const QUEUE = {
  rules: gcra({ limit: 1, window: '2s', name: 'one-per-2s' }),
  name: 'queue',
  delay: { max: '1m' as const },
}
const TENANT = {
  rules: fixedWindow({ limit: 2, window: '1m', name: 'tenant-minute' }),
  name: 'tenant',
  key: () => 'tenant-a',
}

interface App {
  url: string
  /** The operator handle of the tenant limiter. */
  tenant: () => LimiterOverrides
  close(): Promise<void>
}
type Start = (store: Store, observer: RateLimitObserver, registry: Registry) => Promise<App>

const startExpress: Start = async (store, observer, registry) => {
  const app = express()
  app.get('/metrics', async (_req, res) => {
    res.type(registry.contentType).send(await registry.metrics())
  })
  const common = { store, observer }
  const tenant = expressRateLimit({ ...TENANT, ...common, overrides: store.overrides === true })
  app.get('/items/:id', expressRateLimit({ ...API, ...common }), (_req, res) => res.send('item'))
  app.get('/queue', expressRateLimit({ ...QUEUE, ...common }), (_req, res) => res.send('queued'))
  app.get('/tenant', tenant, (_req, res) => res.send('tenant'))
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    tenant: () => tenant.overrides,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

const startFastify: Start = async (store, observer, registry) => {
  const app = fastify({ exposeHeadRoutes: false }) // one limiter per route: no HEAD twin to select
  app.get('/metrics', async (_request, reply) => {
    reply.type(registry.contentType)
    return registry.metrics()
  })
  await app.register(fastifyRateLimit, { ...API, store, observer })
  app.get('/items/:id', async () => 'item')
  app.get('/queue', { config: { ratewindow: QUEUE } }, async () => 'queued')
  app.get(
    '/tenant',
    { config: { ratewindow: { ...TENANT, overrides: store.overrides === true } } },
    async () => 'tenant',
  )
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    tenant: () => app.ratewindow.overrides({ name: 'tenant' }),
    close: () => app.close(),
  }
}

/** The samples of an exposition text: `name{labels}` (labels sorted as written) → value. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const space = line.lastIndexOf(' ')
    samples.set(line.slice(0, space), Number(line.slice(space + 1)))
  }
  return samples
}

/** A sample's name as prom-client writes it: labels in the order given. */
const sample = (name: string, labels: Record<string, string>) =>
  `${name}{${Object.entries(labels)
    .map(([label, value]) => `${label}="${value}"`)
    .join(',')}}`

async function scrape(url: string): Promise<Map<string, number>> {
  const response = await fetch(`${url}/metrics`)
  expect(response.status).toBe(200)
  return parse(await response.text())
}

async function statuses(url: string, path: string, n: number): Promise<number[]> {
  const list: number[] = []
  for (let i = 0; i < n; i++) list.push((await fetch(`${url}${path}`)).status)
  return list
}

const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

async function memoryStore(): Promise<Store> {
  return new MemoryStore()
}

async function redisStore(): Promise<Store> {
  const server = await RedisServer.start()
  const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 0 })
  cleanups.push(async () => {
    client.disconnect()
    await server.stop()
  })
  return new RedisStore({ client })
}

const frameworks = { Express: startExpress, Fastify: startFastify }
const stores = { MemoryStore: memoryStore, RedisStore: redisStore }

for (const [framework, start] of Object.entries(frameworks)) {
  for (const [storeName, makeStore] of Object.entries(stores)) {
    describe(`${framework} with ${storeName}`, () => {
      it('a scrape after a scripted sequence shows every metric with the expected values', async () => {
        const store = await makeStore()
        const registry = new Registry()
        const app = await start(store, prometheusMetrics({ registry }), registry)
        cleanups.push(() => app.close())

        // 12 requests to a limit of 10: 10 allowed, 2 limited, one near-limit signal (the 8th).
        expect(await statuses(app.url, '/items/1', 12)).toEqual([...Array(10).fill(200), 429, 429])
        let metrics = await scrape(app.url)
        const api = { limiter: 'api', rule: 'per-minute' }
        const decisions = (outcome: string) =>
          metrics.get(
            sample('ratewindow_decisions_total', { ...api, outcome, route: '/items/:id', plan: '' }),
          )
        expect([decisions('allowed'), decisions('limited')]).toEqual([10, 2])
        expect(metrics.get(sample('ratewindow_near_limit_total', api))).toBe(1)
        const consume = { limiter: 'api', store: 'store', operation: 'consume' }
        expect(metrics.get(sample('ratewindow_store_duration_seconds_count', consume))).toBe(12)
        expect(
          metrics.get(sample('ratewindow_store_duration_seconds_bucket', { le: '+Inf', ...consume })),
        ).toBe(12)

        // A request that waits for its slot (`delay`, about 2 s), counted while it waits, then no longer.
        expect(await statuses(app.url, '/queue', 1)).toEqual([200])
        const waiter = fetch(`${app.url}/queue`)
        const queue = sample('ratewindow_waiting_requests', { limiter: 'queue' })
        await until(
          async () => (await scrape(app.url)).get(queue) === 1,
          'the scrape shows one request of `queue` waiting',
        )
        expect((await waiter).status).toBe(200)
        await until(
          async () => (await scrape(app.url)).get(queue) === 0,
          'the scrape shows none waiting once it was served',
        )
        metrics = await scrape(app.url)
        expect(
          metrics.get(
            sample('ratewindow_decisions_total', {
              limiter: 'queue',
              rule: 'one-per-2s',
              outcome: 'delayed',
              route: '/queue',
              plan: '',
            }),
          ),
        ).toBe(1)

        // Overrides: the ones made here, and the decisions made under them.
        if (store.overrides === true) {
          await app.tenant().set('tenant-a', { limit: 3 })
          await app.tenant().block('tenant-b', { for: '1h' })
          expect(await statuses(app.url, '/tenant', 4)).toEqual([200, 200, 200, 429])
          metrics = await scrape(app.url)
          const changes = (action: string) =>
            metrics.get(sample('ratewindow_override_changes_total', { limiter: 'tenant', action }))
          expect([changes('set'), changes('block')]).toEqual([1, 1])
          expect(
            metrics.get(
              sample('ratewindow_override_decisions_total', { limiter: 'tenant', override: 'limits' }),
            ),
          ).toBe(4)
        }
      })
    })
  }
}

describe('breaker state (RedisStore)', () => {
  it('shows the breaker open once the Redis server is gone', async () => {
    const server = await RedisServer.start()
    const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 0 })
    client.on('error', () => {}) // the server is stopped on purpose: the store reports the failures
    cleanups.push(async () => client.disconnect())
    const registry = new Registry()
    const app = await startExpress(
      new RedisStore({ client, readyTimeout: '100ms' }),
      prometheusMetrics({ registry }),
      registry,
    )
    cleanups.push(() => app.close())
    expect(await statuses(app.url, '/items/1', 1)).toEqual([200])
    await server.stop()
    const store = { limiter: 'api', store: 'store' }
    const opened = sample('ratewindow_breaker_transitions_total', { ...store, from: 'closed', to: 'open' })
    let metrics = new Map<string, number>()
    await until(
      async () => {
        await statuses(app.url, '/items/1', 1) // fails open, and counts toward the breaker
        metrics = await scrape(app.url)
        return metrics.get(opened) === 1
      },
      () => `the scrape shows the breaker opened (last: ${metrics.get(opened)})`,
      { within: 20_000 },
    )
    // Open, or half-open if its cooldown passed meanwhile: one breaker, no longer closed.
    const state = (name: string) => metrics.get(sample('ratewindow_breaker_state', { ...store, state: name }))
    expect([state('closed'), (state('open') ?? 0) + (state('half-open') ?? 0)]).toEqual([0, 1])
    const errors = [...metrics]
      .filter(([name]) => name.startsWith('ratewindow_store_errors_total{limiter="api",store="store"'))
      .reduce((sum, [, count]) => sum + count, 0)
    expect(errors).toBeGreaterThanOrEqual(5) // the failures that opened it
  })
})
