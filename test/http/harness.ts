/**
 * One harness per framework and major version: real apps on real listening servers (127.0.0.1, free port),
 * with the same routes, so that one behaviour suite runs unchanged against every adapter.
 */
import { once } from 'node:events'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { type HttpRateLimitOptions, MemoryStore, RedisStore, type Store } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { type FastifyRateLimitOptions, rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import { type HonoRateLimitOptions, rateLimit as honoRateLimit, type RateLimitEnv } from '@ratewindow/hono'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import express5 from 'express'
import express4 from 'express4'
import fastify5, { type FastifyReply } from 'fastify'
import fastify4 from 'fastify4'
import type { Hono } from 'hono'
import type { Cluster, Redis } from 'ioredis'
import Koa3 from 'koa'
import Koa2 from 'koa2'
import { afterEach } from 'vitest'
import { useGeneralPipeline } from '../../packages/core/src/http/compiled.js'
import type { ManualClock } from '../support/clock.js'
import { until } from '../support/connections.js'
import { type HonoPath, honoTestApp } from '../support/hono-app.js'
import { countedWork, parking } from '../support/parked.js'
import { clusterClient, standaloneClient } from '../support/redis.js'
import { NEST_MAJOR, nestFramework } from './nest-harness.js'

let storeCount = 0
/** The Redis clients of test stores still connecting: `appPerTest`'s `start` waits for them (`storesConnected`). */
const connecting = new Set<Promise<void>>()

/**
 * `client`, whose connection `storesConnected` waits for. A fresh ioredis client holds the store's first call
 * until its handshake is done (connect, CLIENT SETINFO, the INFO ready check), and the limiter's `timeout` (250 ms
 * by default) counts that handshake too: on a loaded machine the first request of a test got the store failure
 * instead of its answer. An application's client is connected before its traffic comes; a test's is too.
 * Event-driven, not polled: it must not wait on a test's fake timers.
 */
function connectsBeforeUse<Client extends Redis | Cluster>(client: Client): Client {
  const pending = new Promise<void>((resolve) => {
    const done = () => {
      client.off('ready', done)
      client.off('end', done)
      connecting.delete(pending)
      resolve()
    }
    client.on('ready', done)
    client.on('end', done)
  })
  connecting.add(pending)
  return client
}

/** Resolves once the Redis clients of the stores made so far are connected (or closed). */
export async function storesConnected(): Promise<void> {
  await Promise.all(connecting)
}

/**
 * The stores of the HTTP tests, each made fresh: memory, Redis (the shared server) and Redis Cluster (the shared
 * one), each Redis store with a prefix of its own named after the test file. On `clock` when given (the test's
 * driven clock), else on real time (Redis: the server's). A Redis store's client is connecting once it is made:
 * `appPerTest`'s `start` waits until it is connected (`storesConnected`).
 */
export function testStores(name: string) {
  const prefix = () => `${name}${process.pid}x${storeCount++}:`
  return {
    memory: (clock?: ManualClock): Store => new MemoryStore({ clock: clock?.read }),
    redis: (clock?: ManualClock): Store =>
      new RedisStore({ client: connectsBeforeUse(standaloneClient()), clock: clock?.read, prefix: prefix() }),
    cluster: (clock?: ManualClock): Store =>
      new RedisStore({ client: connectsBeforeUse(clusterClient()), clock: clock?.read, prefix: prefix() }),
  }
}

/** The stores an HTTP test runs on, on the test's driven clock when given: memory, and Redis (`testStores`). */
export function storesOnClock(name: string): [string, (clock?: ManualClock) => Store][] {
  const make = testStores(name)
  return [
    ['memory store', make.memory],
    ['Redis store', make.redis],
  ]
}

/** Requests parked in GET /hold until the test lets them go. */
const held = parking()

/** Resolves when `count` requests are parked in GET /hold (bounded: fails after 5 s). */
export function waitForHeld(count: number): Promise<void> {
  return until(
    () => held.waiting >= count,
    () => `${count} requests reach GET /hold (${held.waiting} did)`,
    {
      every: 10,
    },
  )
}

/** Lets every parked GET /hold request answer. */
export function releaseHeld(): void {
  held.releaseAll()
}

/** A started test app: its base URL and how to stop it. */
export interface TestApp {
  url: string
  close(): Promise<void>
}

/** The app on `server` once it listens on 127.0.0.1; `close` stops it. */
export async function listening(server: Server, close?: () => Promise<void>): Promise<TestApp> {
  if (!server.listening) await once(server, 'listening')
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: close ?? (() => new Promise((resolve) => server.close(() => resolve()))),
  }
}

/**
 * One app per test, closed after it: `start(spec)` starts the test's app through `startApp` and answers its URL,
 * `app()` is the app running, and `close()` closes it before the test ends (to start another). The app starts once
 * the Redis clients of the spec's stores are connected (`storesConnected`). After each test, `beforeClose` runs
 * first (to let parked requests go). Call it in a `describe`: it adds an `afterEach`.
 */
export function appPerTest<Spec, App extends TestApp = RunningApp>(
  startApp: (spec: Spec) => Promise<App>,
  beforeClose?: () => unknown,
): { start(spec: Spec): Promise<string>; app(): App | undefined; close(): Promise<void> } {
  let app: App | undefined
  const close = async () => {
    const running = app
    app = undefined
    await running?.close()
  }
  afterEach(async () => {
    await beforeClose?.()
    await close()
  })
  return {
    async start(spec) {
      // The spec's stores are made by now: their Redis clients connect before the first request comes.
      await storesConnected()
      app = await startApp(spec)
      return app.url
    },
    app: () => app,
    close,
  }
}

/** Resolves once the server holds no connection: it has seen every client go (bounded, see `until`). */
export function connectionsClosed(app: RunningApp): Promise<void> {
  return until(
    () =>
      new Promise<boolean>((resolve, reject) =>
        app.server.getConnections((error, count) => (error ? reject(error) : resolve(count === 0))),
      ),
    'the server saw every client go',
  )
}

type ErrorWithCode = Error & { code?: string }

/** Express error handler: a thrown error answers 500 with its code (or message) as JSON. */
export function expressErrorsAsJson(
  error: ErrorWithCode,
  _request: unknown,
  response: express5.Response,
  _next: unknown,
): void {
  response.status(500).json({ error: error.code ?? error.message })
}

/** Koa middleware: a thrown error answers 500 with its code (or message) as JSON. */
export async function koaErrorsAsJson(ctx: Koa3.Context, next: Koa3.Next): Promise<void> {
  try {
    await next()
  } catch (error) {
    ctx.status = 500
    ctx.body = { error: (error as ErrorWithCode).code ?? (error as Error).message }
  }
}

/** Fastify error handler: a thrown error answers 500 with its code (or message) as JSON. */
export function fastifyErrorsAsJson(error: ErrorWithCode, _request: unknown, reply: FastifyReply): void {
  void reply.code(500).send({ error: error.code ?? error.message })
}

/** The options common to all adapters (handler signatures differ and are tested per framework). */
export type CommonOptions = HttpRateLimitOptions<unknown>

export interface AppSpec {
  /** Middleware options applied to every route. */
  global?: CommonOptions
  /** Options for one route only: `/limited`. */
  route?: CommonOptions
  /**
   * Trust X-Forwarded-For from the one proxy at 127.0.0.1 (to choose client IPs in tests); `'every-hop'` for
   * the permissive setting of each framework. @default true
   */
  trustProxy?: boolean | 'every-hop'
}

export interface RunningApp {
  url: string
  server: Server
  close(): Promise<void>
}

/**
 * Routes: GET / (200 "ok"), GET /fail (500), GET /slow (200 once `slowRoute.release()` is called), GET /work
 * (200 once `workRoute.finish()` is called, ending its response even when the client left), GET /limited (the
 * per-route limit), GET /state (the result the adapter exposed on the request, as JSON), GET /settle?n= (settles
 * the request's actual cost at n, answers what `settle` did), GET /hold (answers 200 "held" once the test calls
 * `releaseHeld`). Hono's app is test/support/hono-app.ts's, which the runtime suite serves too.
 */
export interface Framework {
  name: string
  start(spec: AppSpec): Promise<RunningApp>
}

const slow = parking()

/** GET /slow answers only when the test calls `slowRoute.release()`: to disconnect while a handler runs. */
export const slowRoute = {
  /** Handlers of /slow running now. */
  get running(): number {
    return slow.waiting
  },
  release(): void {
    slow.releaseAll()
  },
}

const work = countedWork()

/**
 * GET /work: a handler that keeps working after its client left, and ends its response (answers "done")
 * once the test calls `workRoute.finish()`. Counts the handlers running at once.
 */
export const workRoute = {
  /** Handlers of /work running now. */
  get running(): number {
    return work.count.running
  },
  /** Handlers of /work started so far. */
  get started(): number {
    return work.count.started
  },
  /** The most handlers of /work that ran at once since `reset`. */
  get peak(): number {
    return work.count.peak
  },
  reset(): void {
    work.count.peak = work.count.running
  },
  finish(): void {
    work.finish()
  },
}

/** GET /hold, /slow and /work of every framework's app: each waits here until the test lets it go. */
const PARKED = {
  hold: () => held.wait(),
  slow: () => slow.wait(),
  work: (signal?: AbortSignal) => work.run(signal),
}

async function listen(server: Server): Promise<RunningApp> {
  if (!server.listening) server.listen(0, '127.0.0.1')
  return { ...(await listening(server)), server }
}

function expressFramework(name: string, create: typeof express5): Framework {
  return {
    name,
    async start({ global, route, trustProxy = true }) {
      const app = create()
      app.set('trust proxy', trustProxy === 'every-hop' ? true : trustProxy ? 'loopback' : false)
      if (global) app.use(expressRateLimit(global))
      app.get('/', (_request, response) => {
        response.send('ok')
      })
      app.get('/fail', (_request, response) => {
        response.status(500).send('failed')
      })
      app.get('/slow', async (_request, response) => {
        await PARKED.slow()
        if (!response.destroyed) response.send('late')
      })
      app.get('/work', async (_request, response) => {
        await PARKED.work()
        response.send('done') // also when the client left: the handler ends its response
      })
      app.get('/limited', ...(route ? [expressRateLimit(route)] : []), (_request, response) => {
        response.send('limited route')
      })
      app.get('/state', (request, response) => {
        response.json(request.rateLimit ?? null)
      })
      app.get('/hold', async (_request, response) => {
        await PARKED.hold()
        response.send('held')
      })
      app.get('/settle', async (request, response) => {
        response.json((await request.rateLimit?.settle?.(Number(request.query.n))) ?? null)
      })
      app.use(expressErrorsAsJson)
      return listen(app.listen(0, '127.0.0.1'))
    },
  }
}

function koaFramework(name: string, Koa: typeof Koa3): Framework {
  return {
    name,
    async start({ global, route, trustProxy = true }) {
      const app = new Koa()
      app.proxy = trustProxy !== false
      if (trustProxy === true) app.maxIpsCount = 1
      app.use(koaErrorsAsJson)
      if (global) app.use(koaRateLimit(global))
      const perRoute = route ? koaRateLimit(route) : undefined
      app.use(async (ctx, next) => {
        if (ctx.path === '/limited' && perRoute) return perRoute(ctx, next)
        return next()
      })
      app.use(async (ctx, next) => {
        if (ctx.path !== '/hold') return next()
        await PARKED.hold()
        ctx.body = 'held'
      })
      app.use(async (ctx, next) => {
        if (ctx.path !== '/settle') return next()
        ctx.body = (await ctx.state.rateLimit?.settle?.(Number(ctx.query.n))) ?? null
      })
      app.use(async (ctx) => {
        if (ctx.path === '/slow') {
          await PARKED.slow()
          ctx.body = 'late'
        } else if (ctx.path === '/work') {
          await PARKED.work()
          ctx.body = 'done'
        } else if (ctx.path === '/fail') {
          ctx.status = 500
          ctx.body = 'failed'
        } else if (ctx.path === '/limited') ctx.body = 'limited route'
        else if (ctx.path === '/state') ctx.body = ctx.state.rateLimit ?? null
        else ctx.body = 'ok'
      })
      return listen(app.listen(0, '127.0.0.1'))
    },
  }
}

function fastifyFramework(name: string, create: typeof fastify5): Framework {
  return {
    name,
    async start({ global, route, trustProxy = true }) {
      const app = create({ trustProxy: trustProxy === 'every-hop' ? true : trustProxy ? '127.0.0.1' : false })
      app.setErrorHandler(fastifyErrorsAsJson)
      await app.register(fastifyRateLimit, {
        ...(global ?? {}),
        global: global !== undefined,
      } as FastifyRateLimitOptions)
      app.get('/', async () => 'ok')
      app.get('/fail', async (_request, reply) => reply.code(500).send('failed'))
      app.get('/slow', async () => {
        await PARKED.slow()
        return 'late'
      })
      app.get('/work', async () => {
        await PARKED.work()
        return 'done'
      })
      app.get('/limited', { config: route ? { ratewindow: route } : {} }, async () => 'limited route')
      app.get('/state', async (request) => request.rateLimit)
      app.get('/hold', async () => {
        await PARKED.hold()
        return 'held'
      })
      app.get(
        '/settle',
        async (request) =>
          (await request.rateLimit?.settle?.(Number((request.query as { n: string }).n))) ?? null,
      )
      await app.listen({ port: 0, host: '127.0.0.1' })
      return listen(app.server)
    },
  }
}

/**
 * A request header as a test's `key`, `skip`, `cost` or `rules` function reads it: from the request's header map
 * (Express, Koa, Fastify) or through a Hono context's `c.req.header(name)`.
 */
export function headerOf(request: unknown, name: string): string | undefined {
  const hono = (request as { req?: { header?: (name: string) => string | undefined } }).req
  if (typeof hono?.header === 'function') return hono.header(name)
  const value = (request as { headers?: Record<string, unknown> }).headers?.[name]
  return typeof value === 'string' ? value : undefined
}

/**
 * The client address options of a Hono test app: the socket's (`@hono/node-server`), and X-Forwarded-For from
 * the one proxy at 127.0.0.1 as the other frameworks trust it (`'every-hop'`: any address).
 */
export function honoAddress(trustProxy: AppSpec['trustProxy'] = true): HonoRateLimitOptions {
  if (trustProxy === false) return { getConnInfo }
  return { getConnInfo, trustProxy: trustProxy === 'every-hop' ? ['0.0.0.0/0', '::/0'] : '127.0.0.1' }
}

/** A Hono app on `@hono/node-server`, once it listens on 127.0.0.1. */
export async function serveHono(app: Hono<RateLimitEnv>): Promise<RunningApp> {
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server
  return listen(server)
}

/** The Hono test app's limiters: the harness's, and the composition and policy tests' `routes` and `shared`. */
export interface HonoSpec extends AppSpec {
  routes?: Partial<Record<HonoPath, CommonOptions>>
  shared?: CommonOptions
}

/**
 * The Hono test app (test/support/hono-app.ts) on `@hono/node-server`: its limiters made from `spec` with the
 * socket's client address (`honoAddress`), its parked routes the harness's.
 */
export async function startHono({ global, route, routes = {}, shared, trustProxy = true }: HonoSpec) {
  const address = honoAddress(trustProxy)
  const limiter = (options: CommonOptions) => honoRateLimit({ ...address, ...options })
  const app = honoTestApp({
    global: global && limiter(global),
    shared: shared && limiter(shared),
    route: route && limiter(route),
    routes: Object.fromEntries(Object.entries(routes).map(([path, options]) => [path, limiter(options)])),
    parked: PARKED,
  })
  return serveHono(app)
}

export const FRAMEWORKS: Framework[] = [
  expressFramework('Express 5', express5),
  expressFramework('Express 4', express4 as unknown as typeof express5),
  koaFramework('Koa 3', Koa3),
  koaFramework('Koa 2', Koa2 as unknown as typeof Koa3),
  fastifyFramework('Fastify 5', fastify5),
  fastifyFramework('Fastify 4', fastify4 as unknown as typeof fastify5),
  { name: 'Hono 4 on Node', start: startHono },
  ...NEST_FRAMEWORKS(),
]

/**
 * The frameworks, and Express 5 again with every middleware on the engine's general pipeline: the cases whose
 * configuration takes the compiled path (packages/core/src/http/compiled.ts) run on both paths, so that the two
 * cannot drift. The engine's path does not depend on the framework: one framework runs both.
 */
export const BOTH_PATHS: Framework[] = [
  ...FRAMEWORKS,
  onGeneralPipeline(expressFramework('Express 5', express5)),
]

/** `framework` with the middleware it builds on the general pipeline (each picks its path when it is built). */
function onGeneralPipeline(framework: Framework): Framework {
  return {
    name: `${framework.name}, general pipeline`,
    start(spec) {
      // The app's middleware are built before its first await.
      useGeneralPipeline(true)
      try {
        return framework.start(spec)
      } finally {
        useGeneralPipeline(false)
      }
    },
  }
}

/**
 * Nest on both HTTP platforms (test/http/nest-harness.ts), sharing this harness's routes: Nest 12, or Nest 11
 * under vitest.nest11.config.ts.
 */
function NEST_FRAMEWORKS(): Framework[] {
  return [
    nestFramework(`Nest ${NEST_MAJOR} on Express`, 'express', PARKED),
    nestFramework(`Nest ${NEST_MAJOR} on Fastify`, 'fastify', PARKED),
  ]
}
