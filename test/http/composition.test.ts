/**
 * Limiters combined the way applications combine them: a global limiter and per-route limiters on ONE shared
 * store (memory, Redis, Redis Cluster), named groups, Fastify option merges, several registrations, auth hooks,
 * and option names brought from the peer libraries. Every adapter and framework version.
 */
import Router from '@koa/router'
import { type DecisionEvent, MemoryStore, type Store, slidingWindowLog, tokenBucket } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { type FastifyRateLimitOptions, rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import express5 from 'express'
import express4 from 'express4'
import fastify5 from 'fastify'
import fastify4 from 'fastify4'
import Koa3 from 'koa'
import Koa2 from 'koa2'
import { RedisStore as RateLimitRedisStore } from 'rate-limit-redis'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import {
  type TestApp as App,
  appPerTest,
  type CommonOptions,
  expressErrorsAsJson,
  fastifyErrorsAsJson,
  koaErrorsAsJson,
  listening,
  startHono,
  testStores,
} from './harness.js'
import { NEST_MAJOR, nestPathsModule, startNest } from './nest-harness.js'

const PATHS = ['/', '/a', '/b', '/c', '/login'] as const

interface Spec {
  /** Applied to every route (Fastify: the plugin options). */
  global?: CommonOptions
  /** Per-route limiters (Fastify: `config.ratewindow`, merged over the plugin options). */
  routes?: Partial<Record<(typeof PATHS)[number], CommonOptions>>
}

interface Adapter {
  name: string
  start(spec: Spec): Promise<App>
}

function expressAdapter(name: string, create: typeof express5): Adapter {
  return {
    name,
    async start({ global, routes = {} }) {
      const app = create()
      if (global) app.use(expressRateLimit(global))
      for (const path of PATHS) {
        const route = routes[path]
        app.get(path, ...(route ? [expressRateLimit(route)] : []), (_request, response) => {
          response.send(`ok ${path}`)
        })
      }
      app.use(expressErrorsAsJson)
      const server = app.listen(0, '127.0.0.1')
      return listening(server)
    },
  }
}

function koaAdapter(name: string, Koa: typeof Koa3): Adapter {
  return {
    name,
    async start({ global, routes = {} }) {
      const app = new Koa()
      const router = new Router()
      app.use(koaErrorsAsJson)
      if (global) app.use(koaRateLimit(global))
      for (const path of PATHS) {
        const route = routes[path]
        const answer = (ctx: Koa3.Context) => {
          ctx.body = `ok ${path}`
        }
        if (route) router.get(path, koaRateLimit(route), answer)
        else router.get(path, answer)
      }
      app.use(router.routes())
      const server = app.listen(0, '127.0.0.1')
      return listening(server)
    },
  }
}

function fastifyAdapter(name: string, create: typeof fastify5): Adapter {
  return {
    name,
    async start({ global, routes = {} }) {
      const app = create()
      app.setErrorHandler(fastifyErrorsAsJson)
      try {
        await app.register(fastifyRateLimit, {
          ...(global ?? {}),
          global: global !== undefined,
        } as FastifyRateLimitOptions)
        for (const path of PATHS) {
          const route = routes[path]
          app.get(path, { config: route ? { ratewindow: route as never } : {} }, async () => `ok ${path}`)
        }
        await app.listen({ port: 0, host: '127.0.0.1' })
      } catch (error) {
        await app.close()
        throw error
      }
      return listening(app.server, () => app.close())
    },
  }
}

/** The Hono test app of harness.ts: `/`'s own limiter is its `shared` one. */
function honoAdapter(name: string): Adapter {
  return {
    name,
    start: ({ global, routes: { '/': root, ...routes } = {} }) => startHono({ global, shared: root, routes }),
  }
}

function nestAdapter(name: string, platform: 'express' | 'fastify'): Adapter {
  return {
    name,
    start: ({ global, routes = {} }) => startNest(platform, nestPathsModule(PATHS, global, routes)),
  }
}

const ADAPTERS: Adapter[] = [
  expressAdapter('Express 5', express5),
  expressAdapter('Express 4', express4 as unknown as typeof express5),
  koaAdapter('Koa 3 + @koa/router', Koa3),
  koaAdapter('Koa 2 + @koa/router', Koa2 as unknown as typeof Koa3),
  fastifyAdapter('Fastify 5', fastify5),
  fastifyAdapter('Fastify 4', fastify4 as unknown as typeof fastify5),
  honoAdapter('Hono 4 on Node'),
  nestAdapter(`Nest ${NEST_MAJOR} on Express`, 'express'),
  nestAdapter(`Nest ${NEST_MAJOR} on Fastify`, 'fastify'),
]

/** Fastify's route options, and Nest's `@RateLimit()`, merge over the global ones: one limiter per route. */
const mergesRoutes = (adapter: Adapter) => /^(Fastify|Nest)/.test(adapter.name)

const make = testStores('comp')
const STORES: [string, () => Store][] = [
  ['one MemoryStore', make.memory],
  ['one RedisStore', make.redis],
  ['one RedisStore on a Cluster', make.cluster],
]

const statuses = async (url: string, path: string, times: number) => {
  const codes: number[] = []
  for (let i = 0; i < times; i++) codes.push((await request(url).get(path)).status)
  return codes
}

describe.each(ADAPTERS)('$name', (adapter) => {
  const { start } = appPerTest((spec: Spec) => adapter.start(spec))

  it("labels a route limiter's decisions with the framework's route pattern, and a global one's where known", async () => {
    const routes: (string | undefined)[] = []
    const observer = { onDecision: (event: DecisionEvent) => void routes.push(event.route) }
    const url = await start({
      global: { limit: 10, name: 'global', observer },
      routes: { '/a': { limit: 10, name: 'a', observer } },
    })
    await request(url).get('/a').expect(200)
    // Express, Koa and Hono (`app.use`) run a global middleware before routing: no route is known to it yet.
    // Fastify merges the route's options over the plugin's, Nest a handler's `@RateLimit()` over the module's: one
    // limiter, which knows its route.
    expect(routes).toEqual(mergesRoutes(adapter) ? ['/a'] : [undefined, '/a'])
  })

  describe.each(STORES)('on %s', (_, makeStore) => {
    it('keeps a global and a per-route limiter apart (regression: the route answered 429 at once)', async () => {
      const store = makeStore()
      const url = await start({ global: { limit: 10, store }, routes: { '/login': { limit: 3, store } } })
      expect(await statuses(url, '/', 3)).toEqual([200, 200, 200])
      expect(await statuses(url, '/login', 4)).toEqual([200, 200, 200, 429])
      expect((await request(url).get('/').expect(200)).headers['ratelimit-limit']).toBe('10')
    })

    it('shares one budget across the routes of a named group, not one per route', async () => {
      const store = makeStore()
      const login = { limit: 3, window: '1m', group: 'login', store } as const
      const url = await start({ routes: { '/a': login, '/b': login, '/c': login } })
      expect([
        ...(await statuses(url, '/a', 1)),
        ...(await statuses(url, '/b', 1)),
        ...(await statuses(url, '/c', 1)),
      ]).toEqual([200, 200, 200])
      expect(await statuses(url, '/a', 1)).toEqual([429])
      expect(await statuses(url, '/c', 1)).toEqual([429])
      expect(await statuses(url, '/', 2)).toEqual([200, 200])
    })

    it('keeps limiters with different algorithms or windows apart on the one store', async () => {
      const store = makeStore()
      const url = await start({
        global: { rules: tokenBucket({ capacity: 5, refillRate: 1, interval: '1m' }), store },
        routes: {
          '/a': { rules: slidingWindowLog({ limit: 2, window: '1m' }), store },
          '/b': { limit: 2, window: '30s', store },
        },
      })
      expect(await statuses(url, '/a', 3)).toEqual([200, 200, 429])
      expect(await statuses(url, '/b', 3)).toEqual([200, 200, 429])
    })
  })

  it('names every unknown option of a ported configuration in one error', async () => {
    // A typical express-rate-limit configuration, as it was: four names to change, one round.
    const ported = {
      windowMs: 15 * 60_000,
      max: 100,
      standardHeaders: 'draft-7',
      keyGenerator: () => 'k',
      limt: 3,
    }
    const error = await adapter.start({ global: ported as CommonOptions }).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option: 'windowMs' })
    const message = (error as Error).message
    expect(message).toMatch(/^5 unknown options in .* options:/)
    for (const hint of ['`window`', '`limit: 100`', '`headers:', '`key:', 'Did you mean `limit`?'])
      expect(message).toContain(hint)
  })

  it("names rate-limit-redis's RedisStore passed as store, and what to use instead", async () => {
    // The same class name as ours: easily imported from the wrong package.
    const store = new RateLimitRedisStore({ sendCommand: async () => 'OK' })
    const error = await adapter
      .start({ global: { limit: 3, store: store as never } })
      .catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'store' })
    expect((error as Error).message).toMatch(/rate-limit-redis's RedisStore, a store for express-rate-limit/)
    expect((error as Error).message).toContain('`new RedisStore({ client })` from @ratewindow/core')
  })

  it('warns once about two limiters that would silently share a counter, or keeps them apart by route', async () => {
    const store = new MemoryStore()
    const spec = { global: { limit: 3, store }, routes: { '/login': { limit: 3, store } } }
    if (mergesRoutes(adapter)) {
      // A Fastify route limiter (a Nest handler's) counts under its own route.
      const url = await start(spec)
      expect(await statuses(url, '/', 3)).toEqual([200, 200, 200])
      expect(await statuses(url, '/login', 4)).toEqual([200, 200, 200, 429])
      return
    }
    // The route limiter, built last, takes the namespace over; the global one says so when it decides.
    const warnings: (Error & { code?: string })[] = []
    const listener = (warning: Error) => warnings.push(warning)
    process.on('warning', listener)
    try {
      const url = await start(spec)
      expect(await statuses(url, '/', 1)).toEqual([200])
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', listener)
    }
    expect(warnings).toContainEqual(
      expect.objectContaining({
        code: 'RATEWINDOW_SUPERSEDED_LIMITER',
        message: expect.stringMatching(/`prefix`.*`group`/),
      }),
    )
    const fresh = new MemoryStore()
    const url = await start({
      global: { limit: 3, store: fresh },
      routes: { '/login': { limit: 3, store: fresh, prefix: 'login' } },
    })
    expect(await statuses(url, '/', 3)).toEqual([200, 200, 200])
    expect(await statuses(url, '/login', 1)).toEqual([429]) // the global limiter applies to /login too
  })

  it.each([
    ['express-rate-limit', { max: 2, windowMs: 60_000 }, 'max', '`limit'],
    ['express-rate-limit', { limit: 2, standardHeaders: 'draft-7' }, 'standardHeaders', '`headers'],
    ['express-rate-limit', { limit: 2, keyGenerator: () => 'k' }, 'keyGenerator', '`key'],
    ['@fastify/rate-limit', { max: 2, timeWindow: '1 minute' }, 'max', '`limit'],
    ['@fastify/rate-limit', { limit: 2, timeWindow: '1 minute' }, 'timeWindow', '`window'],
    [
      '@fastify/rate-limit',
      { limit: 2, errorResponseBuilder: () => ({}) },
      'errorResponseBuilder',
      '`message',
    ],
    ['koa-ratelimit', { duration: 60_000, limit: 2 }, 'duration', '`window'],
    ['koa-ratelimit', { limit: 2, id: () => 'k' }, 'id', '`key'],
    ['koa-ratelimit', { limit: 2, whitelist: () => false }, 'whitelist', '`allowList'],
    ['koa-ratelimit', { limit: 2, blacklist: () => false }, 'blacklist', '`denyList: (ctx) => boolean`'],
    ['koa-ratelimit', { limit: 2, driver: 'memory', db: new Map() }, 'driver', '`store'],
    // Koa's error handling drops the headers set before a throw unless they are passed with it.
    ['koa-ratelimit', { limit: 2, throw: true }, 'throw', '{ headers: ctx.response.headers }'],
  ])('refuses %s option names with the name to use: %j', async (_, options, name, use) => {
    const expected = { code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option: name }
    const error = await adapter.start({ global: options as CommonOptions }).catch((caught: unknown) => caught)
    expect(error).toMatchObject(expected)
    expect((error as Error).message).toContain(use)
    // A deny is never pointed at `skip`, which would let the client through.
    if (name === 'blacklist') expect((error as Error).message).not.toContain('skip')
    const routeError = await adapter
      .start({ routes: { '/login': options as CommonOptions } })
      .catch((caught: unknown) => caught)
    expect(routeError).toMatchObject(expected)
    if (adapter.name.startsWith('Fastify')) expect((routeError as Error).message).toContain('GET /login')
    if (adapter.name.startsWith('Nest'))
      expect((routeError as Error).message).toContain('PathsController.login')
  })
})

describe.each([
  ['Fastify 5', fastify5],
  ['Fastify 4', fastify4 as unknown as typeof fastify5],
])('%s composition', (_, create) => {
  it("a route's rules replace the plugin's limit and window (the README snippet)", async () => {
    const app = create()
    await app.register(fastifyRateLimit, { limit: 100, window: '1m' })
    app.get('/', async () => 'ok')
    app.post(
      '/login',
      { config: { ratewindow: { rules: slidingWindowLog({ limit: 2, window: '15 minutes' }) } } },
      async () => 'in',
    )
    await app.ready()
    expect((await app.inject('/')).headers['ratelimit-limit']).toBe('100')
    const codes = []
    for (let i = 0; i < 3; i++) codes.push((await app.inject({ method: 'POST', url: '/login' })).statusCode)
    expect(codes).toEqual([200, 200, 429])
    await app.close()
  })

  it("a route's limit replaces the plugin's rules", async () => {
    const app = create()
    await app.register(fastifyRateLimit, { rules: tokenBucket({ capacity: 50, refillRate: 5 }) })
    app.get('/', async () => 'ok')
    app.get('/strict', { config: { ratewindow: { limit: 1, window: '1 minute' } } }, async () => 'ok')
    await app.ready()
    expect((await app.inject('/')).headers['ratelimit-limit']).toBe('50')
    expect((await app.inject('/strict')).statusCode).toBe(200)
    expect((await app.inject('/strict')).statusCode).toBe(429)
    await app.close()
  })

  it('enforces two registrations (per IP and per user), each counting a request once', async () => {
    const app = create()
    await app.register(fastifyRateLimit, { limit: 3, prefix: 'ip' })
    await app.register(fastifyRateLimit, {
      limit: 2,
      prefix: 'user',
      key: (request) => String(request.headers['x-user'] ?? 'anonymous'),
    })
    app.get('/', async () => 'ok')
    await app.ready()
    const as = (user: string) => app.inject({ url: '/', headers: { 'x-user': user } })
    expect((await as('alice')).statusCode).toBe(200)
    expect((await as('alice')).statusCode).toBe(200)
    expect((await as('alice')).statusCode).toBe(429) // the per-user limit
    expect((await as('bob')).statusCode).toBe(200) // third for the IP: not yet over its 3
    expect((await as('carol')).statusCode).toBe(429) // the per-IP limit
    await app.close()
  })

  it("hook 'preHandler' sees the user a route's auth hook set; 'onRequest' runs before it", async () => {
    const auth = async (request: { headers: Record<string, unknown>; user?: unknown }) => {
      request.user = request.headers['x-token'] ?? null
    }
    const key = (request: unknown) => `user:${String((request as { user?: unknown }).user)}`
    for (const [where, hook, separate] of [
      ['plugin', 'preHandler', true],
      ['route', 'preHandler', true],
      ['plugin', 'onRequest', false],
    ] as const) {
      const app = create()
      app.decorateRequest('user', null)
      const options = { limit: 1, key, hook }
      await app.register(fastifyRateLimit, where === 'plugin' ? options : { global: false })
      app.get(
        '/',
        { onRequest: auth as never, config: where === 'route' ? { ratewindow: options } : {} },
        async () => 'ok',
      )
      await app.ready()
      const as = (token: string) => app.inject({ url: '/', headers: { 'x-token': token } })
      expect((await as('alice')).statusCode).toBe(200)
      // Before authentication every user is `user:null`, one bucket; after it, one bucket per user.
      expect((await as('bob')).statusCode).toBe(separate ? 200 : 429)
      expect((await as('alice')).statusCode).toBe(429)
      await app.close()
    }
  })

  it('refuses an unknown hook and an unknown route option', async () => {
    const app = create()
    await expect(app.register(fastifyRateLimit, { hook: 'preValidation' as never })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      option: 'hook',
    })
    await app.close()
    const second = create()
    await second.register(fastifyRateLimit, { limit: 5 })
    const error = await (async () => {
      second.get('/', { config: { ratewindow: { limt: 2 } as never } }, async () => 'ok')
      await second.ready()
    })().catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option: 'limt' })
    expect((error as Error).message).toMatch(/Did you mean `limit`/)
    await second.close()
  })
})
