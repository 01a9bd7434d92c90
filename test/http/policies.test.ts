/**
 * Policies over HTTP in every adapter and framework version, on memory, Redis and Redis Cluster: the reset handle, allow
 * and deny lists, and rules resolved per request.
 */
import Router from '@koa/router'
import {
  AccessList,
  fixedWindow,
  MemoryStore,
  type Store,
  slidingWindowCounter,
  tokenBucket,
} from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { type FastifyRateLimitOptions, rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import express5 from 'express'
import express4 from 'express4'
import fastify5 from 'fastify'
import fastify4 from 'fastify4'
import Koa3 from 'koa'
import Koa2 from 'koa2'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import {
  type TestApp as App,
  appPerTest,
  type CommonOptions,
  expressErrorsAsJson,
  fastifyErrorsAsJson,
  headerOf,
  koaErrorsAsJson,
  listening,
  startHono,
  testStores,
} from './harness.js'
import { NEST_MAJOR, nestPoliciesModule, startNest } from './nest-harness.js'

/**
 * GET / and GET /other limited by `options` (one limiter); POST /reset/:key and POST /reset-me call the
 * adapter's reset handle and are not limited.
 */
interface Adapter {
  name: string
  start(options: CommonOptions): Promise<App>
}

function expressAdapter(name: string, create: typeof express5): Adapter {
  return {
    name,
    async start(options) {
      const app = create()
      app.set('trust proxy', 'loopback')
      const limiter = expressRateLimit(options)
      app.get('/', limiter, (_request, response) => {
        response.send('ok')
      })
      app.get('/other', limiter, (_request, response) => {
        response.send('ok')
      })
      app.post('/reset/:key', async (request, response) => {
        await limiter.resetKey(String(request.params.key))
        response.send('reset')
      })
      app.post('/reset-me', async (request, response) => {
        await limiter.reset(request)
        response.send('reset')
      })
      app.use(expressErrorsAsJson)
      const server = app.listen(0, '127.0.0.1')
      return listening(server)
    },
  }
}

function koaAdapter(name: string, Koa: typeof Koa3): Adapter {
  return {
    name,
    async start(options) {
      const app = new Koa()
      app.proxy = true
      app.maxIpsCount = 1
      const router = new Router()
      app.use(koaErrorsAsJson)
      const limiter = koaRateLimit(options)
      const ok = (ctx: Koa3.Context) => {
        ctx.body = 'ok'
      }
      router.get('/', limiter, ok)
      router.get('/other', limiter, ok)
      router.post('/reset/:key', async (ctx) => {
        await limiter.resetKey(String(ctx.params.key))
        ctx.body = 'reset'
      })
      router.post('/reset-me', async (ctx) => {
        await limiter.reset(ctx)
        ctx.body = 'reset'
      })
      app.use(router.routes())
      const server = app.listen(0, '127.0.0.1')
      return listening(server)
    },
  }
}

function fastifyAdapter(name: string, create: typeof fastify5): Adapter {
  return {
    name,
    async start(options) {
      const app = create({ trustProxy: '127.0.0.1' })
      app.setErrorHandler(fastifyErrorsAsJson)
      try {
        await app.register(fastifyRateLimit, options as FastifyRateLimitOptions)
        app.get('/', async () => 'ok')
        app.get('/other', async () => 'ok')
        const exempt = { config: { ratewindow: false as const } }
        app.post<{ Params: { key: string } }>('/reset/:key', exempt, async (request) => {
          await app.ratewindow.resetKey(request.params.key)
          return 'reset'
        })
        app.post('/reset-me', exempt, async (request) => {
          await app.ratewindow.reset(request)
          return 'reset'
        })
        await app.listen({ port: 0, host: '127.0.0.1' })
      } catch (error) {
        await app.close()
        throw error
      }
      return listening(app.server, () => app.close())
    },
  }
}

/** The Hono test app of harness.ts: its `shared` limiter is on GET / and /other, and its reset routes use it. */
function honoAdapter(name: string): Adapter {
  return { name, start: (options) => startHono({ shared: options }) }
}

/** The global guard on GET / and /other; the resets through `RateWindowService` (nest-harness.ts). */
function nestAdapter(name: string, platform: 'express' | 'fastify'): Adapter {
  return { name, start: (options) => startNest(platform, nestPoliciesModule(options)) }
}

const ADAPTERS: Adapter[] = [
  expressAdapter('Express 5', express5),
  expressAdapter('Express 4', express4 as unknown as typeof express5),
  koaAdapter('Koa 3', Koa3),
  koaAdapter('Koa 2', Koa2 as unknown as typeof Koa3),
  fastifyAdapter('Fastify 5', fastify5),
  fastifyAdapter('Fastify 4', fastify4 as unknown as typeof fastify5),
  honoAdapter('Hono 4 on Node'),
  nestAdapter(`Nest ${NEST_MAJOR} on Express`, 'express'),
  nestAdapter(`Nest ${NEST_MAJOR} on Fastify`, 'fastify'),
]

const make = testStores('pol')
const STORES: [string, () => Store][] = [
  ['memory', make.memory],
  ['Redis', make.redis],
  ['Redis Cluster', make.cluster],
]

/** A store that counts the calls reaching it. */
function counting(store: Store): Store & { calls: number } {
  const counter = { calls: 0 }
  return new Proxy(store, {
    get(target, name, receiver) {
      if (name === 'calls') return counter.calls
      const value = Reflect.get(target, name, receiver)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        if (name === 'consume' || name === 'peek' || name === 'reset' || name === 'refund') counter.calls++
        return value.apply(target, args)
      }
    },
  }) as Store & { calls: number }
}

const statuses = async (url: string, times: number, headers: Record<string, string> = {}, path = '/') => {
  const codes: number[] = []
  for (let i = 0; i < times; i++) codes.push((await request(url).get(path).set(headers)).status)
  return codes
}

describe.each(ADAPTERS)('$name', (adapter) => {
  const { start } = appPerTest((options: CommonOptions) => adapter.start(options))

  describe.each(STORES)('on %s', (_, makeStore) => {
    it('resets one key through the handle, leaving other keys counted', async () => {
      const store = makeStore()
      const key = (request: unknown) => headerOf(request, 'x-user') ?? 'anonymous'
      const url = await start({ limit: 2, store, key: key as never })
      expect(await statuses(url, 3, { 'x-user': 'ann' })).toEqual([200, 200, 429])
      expect(await statuses(url, 3, { 'x-user': 'bob' })).toEqual([200, 200, 429])
      await request(url).post('/reset/ann').expect(200)
      expect(await statuses(url, 3, { 'x-user': 'ann' })).toEqual([200, 200, 429])
      expect(await statuses(url, 1, { 'x-user': 'bob' })).toEqual([429])
    })

    it("resets the requesting client's own key (the client IP by default)", async () => {
      const url = await start({ limit: 1, store: makeStore() })
      const client = { 'x-forwarded-for': '203.0.113.9' }
      expect(await statuses(url, 2, client)).toEqual([200, 429])
      expect(await statuses(url, 1, { 'x-forwarded-for': '203.0.113.10' })).toEqual([200])
      await request(url).post('/reset-me').set(client).expect(200)
      expect(await statuses(url, 2, client)).toEqual([200, 429])
      expect(await statuses(url, 1, { 'x-forwarded-for': '203.0.113.10' })).toEqual([429])
    })
  })
})

describe.each([
  ['Fastify 5', fastify5],
  ['Fastify 4', fastify4 as unknown as typeof fastify5],
] as const)('%s: the reset handle with several registrations', (_, create) => {
  it('resets the key in the limiters of every registration, and drops them when the server closes', async () => {
    const app = create()
    const key = (request: { headers: Record<string, unknown> }) => String(request.headers['x-user'])
    await app.register(fastifyRateLimit, { limit: 2, key })
    app.get('/', async () => 'ok')
    await app.register(async (child) => {
      await child.register(fastifyRateLimit, { limit: 1, key, group: 'child' })
      child.get('/child', async () => 'ok')
    })
    await app.ready()
    const get = async (url: string) => (await app.inject({ url, headers: { 'x-user': 'ann' } })).statusCode
    expect([await get('/'), await get('/'), await get('/')]).toEqual([200, 200, 429])
    expect(await get('/child')).toBe(429)
    await app.ratewindow.resetKey('ann')
    expect([await get('/child'), await get('/child')]).toEqual([200, 429])
    await app.ratewindow.resetKey('ann')
    expect([await get('/'), await get('/'), await get('/')]).toEqual([200, 200, 429])
    await app.close()
    await expect(app.ratewindow.resetKey('ann')).resolves.toBeUndefined()
  })

  it('resets one route, one registration or one name, beside the reset of everything', async () => {
    const app = create()
    const key = (request: { headers: Record<string, unknown> }) => String(request.headers['x-user'])
    await app.register(fastifyRateLimit, { limit: 5, key, name: 'api' })
    app.get('/data', async () => 'ok')
    app.post('/login', { config: { ratewindow: { limit: 2, name: 'login' } } }, async (request) => {
      await app.ratewindow.reset(request, { route: 'POST /login' }) // a successful login
      return 'welcome'
    })
    let child: typeof app | undefined
    await app.register(async (instance) => {
      child = instance as unknown as typeof app
      await instance.register(fastifyRateLimit, { limit: 1, key, group: 'child', name: 'child' })
      instance.get('/child', async () => 'ok')
    })
    await app.ready()
    const remaining = async (method: 'GET' | 'POST', url: string) => {
      const response = await app.inject({ method, url, headers: { 'x-user': 'ann' } })
      return [response.statusCode, Number(response.headers['ratelimit-remaining'])]
    }
    // /data is counted by the plugin's limiter, /login by its own.
    expect(await remaining('GET', '/data')).toEqual([200, 4])
    expect(await remaining('POST', '/login')).toEqual([200, 1])
    // The login reset its route's counter only: the API quota keeps what it spent (reset(request) makes it 4).
    expect(await remaining('GET', '/data')).toEqual([200, 3])
    expect(await remaining('POST', '/login')).toEqual([200, 1])
    await app.ratewindow.resetKey('ann', { name: 'api' })
    expect(await remaining('GET', '/data')).toEqual([200, 4])
    expect((await remaining('GET', '/child'))[0]).toBe(200)
    expect((await remaining('GET', '/child'))[0]).toBe(429)
    await app.ratewindow.resetKey('ann', { registration: child! })
    expect((await remaining('GET', '/child'))[0]).toBe(200)
    // The child's reset left the API quota alone: /data, and the two admitted /child requests (the app's
    // registration applies there too; the refused one stopped at the child's limiter), then this one.
    expect(await remaining('GET', '/data')).toEqual([200, 1])
    await expect(app.ratewindow.resetKey('ann', { route: 'POST /logn' })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      message: expect.stringContaining('POST /login'),
    })
    await expect(app.ratewindow.resetKey('ann', { path: '/login' } as never)).rejects.toThrow(/`path`/)
    await app.close()
  })
})

describe.each(ADAPTERS)('$name: allow and deny lists', (adapter) => {
  const { start } = appPerTest((options: CommonOptions) => adapter.start(options))
  const from = (ip: string) => ({ 'x-forwarded-for': ip })

  it('IPv6 entries (a bogon list, ::/0) deny and allow IPv6 clients only; a dotted IPv4-mapped network is IPv4', async () => {
    const denyList = { ips: ['::/8', '::ffff:0:0/96', '::/3', '::/0', '::ffff:203.0.113.0/120'] }
    const url = await start({ limit: 2, store: new MemoryStore(), denyList, allowList: { ips: ['::/0'] } })
    // IPv4 clients, also as a dual-stack socket reports them, are neither denied nor allowed by IPv6 entries.
    expect(await statuses(url, 3, from('198.51.100.7'))).toEqual([200, 200, 429])
    expect(await statuses(url, 1, from('::ffff:198.51.100.8'))).toEqual([200])
    expect(await statuses(url, 1, from('2001:db8::1'))).toEqual([403])
    expect(await statuses(url, 1, from('203.0.113.9'))).toEqual([403])
    expect(await statuses(url, 1, from('::ffff:203.0.113.10'))).toEqual([403])
  })

  describe.each(STORES)('on %s', (_, makeStore) => {
    it('answers deny-listed clients 403 and lets allow-listed ones through, with no store call', async () => {
      const store = counting(makeStore())
      const denyList = new AccessList({ ips: ['198.51.100.0/24', '2001:db8:bad::/48'], keys: [] })
      const allowList = new AccessList({ ips: ['10.0.0.0/8', '198.51.100.7'] })
      const url = await start({ limit: 1, store, allowList, denyList })
      const denied = await request(url).get('/').set(from('198.51.100.7')).expect(403)
      expect(denied.body).toEqual({ error: 'Forbidden', message: 'Access denied.' })
      expect(denied.headers['ratelimit-limit']).toBeUndefined()
      expect(await statuses(url, 1, from('2001:db8:bad:1::9'))).toEqual([403])
      expect(await statuses(url, 3, from('10.1.2.3'))).toEqual([200, 200, 200])
      expect(store.calls).toBe(0)
      expect(await statuses(url, 2, from('203.0.113.1'))).toEqual([200, 429])
      expect(store.calls).toBe(2)
    })

    it('reloads lists at run time, by key as by address', async () => {
      const store = counting(makeStore())
      const denyList = new AccessList()
      const allowList = new AccessList()
      const key = (request: unknown) => headerOf(request, 'x-api-key') ?? 'none'
      const url = await start({
        limit: 1,
        store,
        allowList,
        denyList,
        key: key as never,
        denyStatusCode: 451,
      })
      expect(await statuses(url, 2, { 'x-api-key': 'k1' })).toEqual([200, 429])
      allowList.set({ keys: ['k1'] })
      denyList.set({ keys: ['k2'] })
      const calls = store.calls
      expect(await statuses(url, 2, { 'x-api-key': 'k1' })).toEqual([200, 200])
      expect(await statuses(url, 1, { 'x-api-key': 'k2' })).toEqual([451])
      expect(store.calls).toBe(calls)
      allowList.set({})
      expect(await statuses(url, 1, { 'x-api-key': 'k1' })).toEqual([429])
    })

    it('denyList as a function of the request refuses what it names; deny wins over skip and the allow list', async () => {
      const store = counting(makeStore())
      const header = headerOf
      const url = await start({
        limit: 1,
        store,
        // koa-ratelimit's blacklist function, as it is: true refuses.
        denyList: (async (request: unknown) => header(request, 'x-bot') === 'yes') as never,
        skip: ((request: unknown) => header(request, 'x-internal') === 'yes') as never,
        allowList: { ips: ['10.0.0.0/8'] },
      })
      const denied = await request(url).get('/').set({ 'x-bot': 'yes' }).expect(403)
      expect(denied.body).toEqual({ error: 'Forbidden', message: 'Access denied.' })
      expect(await statuses(url, 1, { 'x-bot': 'yes', 'x-internal': 'yes' })).toEqual([403])
      expect(await statuses(url, 1, { 'x-bot': 'yes', ...from('10.1.2.3') })).toEqual([403])
      expect(store.calls).toBe(0)
      expect(await statuses(url, 2, { 'x-internal': 'yes' })).toEqual([200, 200])
      expect(await statuses(url, 2, from('203.0.113.1'))).toEqual([200, 429])
    })

    it('a deny list by address or key refuses a skipped request too', async () => {
      const key = (request: unknown) => headerOf(request, 'x-api-key') ?? 'none'
      const url = await start({
        limit: 1,
        store: makeStore(),
        key: key as never,
        skip: () => true,
        denyList: { ips: ['198.51.100.0/24'], keys: ['stolen'] },
      })
      expect(await statuses(url, 1, from('198.51.100.7'))).toEqual([403])
      expect(await statuses(url, 1, { 'x-api-key': 'stolen' })).toEqual([403])
      expect(await statuses(url, 2, { 'x-api-key': 'fine' })).toEqual([200, 200])
    })
  })
})

describe.each(ADAPTERS)('$name: rules resolved per request', (adapter) => {
  const { start } = appPerTest((options: CommonOptions) => adapter.start(options))
  const header = headerOf
  const key = (request: unknown) => header(request, 'x-user') ?? 'anonymous'
  // Built once: resolving a plan is one lookup. The fixed window is of hours: a minute's end fell between a test's
  // requests once in CI (Nest 11 on a Redis Cluster: the third request passed in a new window).
  const PLANS = {
    free: fixedWindow({ limit: 2, window: '2h' }),
    pro: [slidingWindowCounter({ limit: 4, window: '10s' }), fixedWindow({ limit: 100, window: '1h' })],
    batch: { rules: tokenBucket({ capacity: 6, refillRate: 1, interval: '1m' }), cost: 3 },
  } as const
  const plan = (request: unknown) => PLANS[(header(request, 'x-plan') ?? 'free') as keyof typeof PLANS]

  describe.each(STORES)('on %s', (_, makeStore) => {
    it("applies each request's plan: its limit, window, algorithm and cost", async () => {
      const url = await start({ rules: plan as never, key: key as never, store: makeStore() })
      const as = (user: string, plan: string) => ({ 'x-user': user, 'x-plan': plan })
      expect(await statuses(url, 3, as('ann', 'free'))).toEqual([200, 200, 429])
      expect(await statuses(url, 5, as('bob', 'pro'))).toEqual([200, 200, 200, 200, 429])
      expect(await statuses(url, 3, as('cy', 'batch'))).toEqual([200, 200, 429])
      const free = await request(url).get('/').set(as('dee', 'free'))
      expect(free.headers['ratelimit-limit']).toBe('2')
      const pro = await request(url).get('/').set(as('dee', 'pro'))
      expect(pro.headers['ratelimit-limit']).toBe('4')
    })

    it('keeps the counters of different rule sets apart for one key, and equal rule sets together', async () => {
      const store = makeStore()
      // Windows of hours: a fixed window's end (on the wall clock) falls inside the test once in thousands of runs,
      // not once in hundreds (it did, in CI: the last request passed in a new window).
      const rules = (request: unknown) =>
        header(request, 'x-plan') === 'pro'
          ? [fixedWindow({ limit: 3, window: '1h' })] // a fresh but equal rule set each time
          : fixedWindow({ limit: 2, window: '2h' })
      const url = await start({ rules: rules as never, key: key as never, store })
      const as = (plan: string) => ({ 'x-user': 'same', 'x-plan': plan })
      expect(await statuses(url, 3, as('free'))).toEqual([200, 200, 429])
      expect(await statuses(url, 4, as('pro'))).toEqual([200, 200, 200, 429])
      expect(await statuses(url, 1, as('free'))).toEqual([429])
    })

    it('hands a throwing or wrong resolver to the framework error handling, per request', async () => {
      const rules = (request: unknown) => {
        if (header(request, 'x-plan') === 'boom') throw new Error('plan lookup failed')
        if (header(request, 'x-plan') === 'bad') return { limit: 5 }
        return PLANS.free
      }
      const url = await start({ rules: rules as never, key: key as never, store: makeStore() })
      const boom = await request(url).get('/').set({ 'x-plan': 'boom' }).expect(500)
      expect(boom.body).toEqual({ error: 'plan lookup failed' })
      const bad = await request(url).get('/').set({ 'x-plan': 'bad' }).expect(500)
      expect(bad.body).toEqual({ error: 'ERR_RATEWINDOW_INVALID_OPTION' })
      expect(await statuses(url, 3)).toEqual([200, 200, 429])
    })

    it('resets a key in every rule set it was counted in', async () => {
      const url = await start({ rules: plan as never, key: key as never, store: makeStore() })
      const as = (plan: string) => ({ 'x-user': 'eve', 'x-plan': plan })
      expect(await statuses(url, 3, as('free'))).toEqual([200, 200, 429])
      expect(await statuses(url, 3, as('batch'))).toEqual([200, 200, 429])
      await request(url).post('/reset/eve').expect(200)
      expect(await statuses(url, 1, as('free'))).toEqual([200])
      expect(await statuses(url, 1, as('batch'))).toEqual([200])
    })
  })
})
