import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { type Store as CoreStore, MemoryStore } from '@ratewindow/core'
import {
  type ExpressRateLimitOptions,
  type Store as ExpressStore,
  rateLimit as expressRateLimit,
} from '@ratewindow/express'
import { type Store as FastifyStore, rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import type { Store as GraphQLStore } from '@ratewindow/graphql'
import type { Store as HonoStore } from '@ratewindow/hono'
import { type Store as KoaStore, rateLimit as koaRateLimit } from '@ratewindow/koa'
import type { Store as NestStore } from '@ratewindow/nestjs'
import express from 'express'
import express4 from 'express4'
import Fastify, { type FastifyInstance } from 'fastify'
import Koa from 'koa'
import request from 'supertest'
import { describe, expect, it, vi } from 'vitest'
import { FRAMEWORKS } from './harness.js'

/** Express options as a literal, typed where written (the way an app writes them inline). */
const rateLimitOptions = (options: ExpressRateLimitOptions) => options

describe('Express specifics', () => {
  it('calls a custom handler with (req, res, next, result) after setting headers', async () => {
    const app = express()
    app.use(
      expressRateLimit({
        limit: 1,
        handler: (_request, response, _next, result) => {
          response.status(429).json({ custom: true, retryAfter: result.retryAfter > 0 })
        },
      }),
    )
    app.get('/', (_request, response) => {
      response.send('ok')
    })
    await request(app).get('/').expect(200)
    const denied = await request(app).get('/').expect(429)
    expect(denied.body).toEqual({ custom: true, retryAfter: true })
    expect(denied.headers['retry-after']).toBeDefined()
  })

  it.each([
    ['Express 5', express],
    ['Express 4', express4 as unknown as typeof express],
  ])(
    "%s: express-rate-limit's handler copied as it is answers as it did there, not 500",
    async (_, create) => {
      for (const message of [undefined, 'Too many requests, please try again later.']) {
        const app = create()
        const seen: [number, number][] = []
        app.use(
          expressRateLimit({
            limit: 1,
            window: '15m',
            ...(message === undefined ? {} : { message }),
            // The handler of express-rate-limit's documentation, its 4th argument being its options there.
            handler: (_request, response, _next, options) => {
              seen.push([options.limit, options.windowMs])
              response.status(options.statusCode).send(options.message)
            },
          }),
        )
        app.get('/', (_request, response) => {
          response.send('ok')
        })
        await request(app).get('/').expect(200)
        const denied = await request(app).get('/').expect(429)
        if (message === undefined) {
          expect(denied.headers['content-type']).toMatch(/^application\/json/)
          expect(denied.body).toMatchObject({ error: 'Too Many Requests', retryAfter: expect.any(Number) })
        } else expect(denied.text).toBe(message)
        expect(seen).toEqual([[1, 900_000]])
      }
    },
  )

  // Issue 32: the handler as express-rate-limit's README writes it returns the `Response` that `send` returns, and
  // failed the type check (TS2322: not assignable to `void | Promise<void>`). This file is typechecked.
  it("express-rate-limit's handler written as an arrow that returns `res.status(...).send(...)` typechecks and answers", async () => {
    const app = express()
    app.use(
      expressRateLimit({
        limit: 1,
        message: 'Too many requests, please try again later.',
        handler: (_req, res, _next, options) => res.status(options.statusCode).send(options.message),
      }),
    )
    app.get('/', (_request, response) => {
      response.send('ok')
    })
    await request(app).get('/').expect(200)
    expect((await request(app).get('/').expect(429)).text).toBe('Too many requests, please try again later.')
  })

  it("`requestWasSuccessful` untyped, as `(statusCode)` and as express-rate-limit's `(req, res)`: each typed as it is called", async () => {
    for (const requestWasSuccessful of [
      rateLimitOptions({ requestWasSuccessful: (statusCode) => statusCode < 400 }),
      rateLimitOptions({ requestWasSuccessful: (req, res) => req.method === 'GET' && res.statusCode < 400 }),
      rateLimitOptions({ requestWasSuccessful: async (_req, res) => res.statusCode < 400 }),
    ]) {
      const app = express()
      app.use(expressRateLimit({ limit: 1, skipFailedRequests: true, ...requestWasSuccessful }))
      app.get('/', (_request, response) => {
        response.status(404).send('missing')
      })
      for (let i = 0; i < 3; i++) await request(app).get('/').expect(404) // each given back
    }
  })

  it('writes nothing when an earlier middleware already answered', async () => {
    const app = express()
    const seen: unknown[] = []
    app.use((_request, response, next) => {
      response.send('early')
      next()
    })
    app.use(expressRateLimit({ limit: 1 }))
    app.use((request: express.Request, _response: express.Response, next: express.NextFunction) => {
      seen.push(request.rateLimit?.allowed)
      next()
    })
    app.use(
      (error: Error, _request: express.Request, _response: express.Response, next: express.NextFunction) => {
        seen.push(error)
        next()
      },
    )
    await request(app).get('/').expect(200, 'early')
    await request(app).get('/').expect(200, 'early')
    expect(seen).toEqual([true, false])
  })
})

describe('Koa specifics', () => {
  it('does not call next() when limited, and calls a custom handler with (ctx, result)', async () => {
    const app = new Koa()
    const downstream = vi.fn()
    app.use(
      koaRateLimit({
        limit: 1,
        handler: (ctx, result) => {
          ctx.status = 429
          ctx.body = { custom: result.allowed }
        },
      }),
    )
    app.use((ctx) => {
      downstream()
      ctx.body = 'ok'
    })
    const server = app.listen(0, '127.0.0.1')
    await once(server, 'listening')
    await request(server).get('/').expect(200)
    expect((await request(server).get('/').expect(429)).body).toEqual({ custom: false })
    expect(downstream).toHaveBeenCalledTimes(1)
    server.close()
  })
})

describe('Fastify specifics', () => {
  it("config.ratewindow refuses the peers' option names at compile time, as at registration", async () => {
    const refused = async (name: string, route: (app: FastifyInstance) => void) => {
      const app = Fastify()
      await app.register(fastifyRateLimit, { limit: 5 })
      const error = await (async () => {
        route(app)
        await app.ready()
      })().catch((caught: unknown) => caught)
      expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option: name })
      await app.close()
    }
    await refused('max', (app) =>
      // @ts-expect-error `max` is @fastify/rate-limit's name: ratewindow's is `limit`
      app.get('/a', { config: { ratewindow: { max: 2 } } }, async () => 'ok'),
    )
    await refused('timeWindow', (app) =>
      // @ts-expect-error `timeWindow` is @fastify/rate-limit's name: ratewindow's is `window`
      app.get('/a', { config: { ratewindow: { limit: 2, timeWindow: '1 minute' } } }, async () => 'ok'),
    )
    await refused('global', (app) =>
      // @ts-expect-error `global` is a plugin option only
      app.get('/a', { config: { ratewindow: { global: false } } }, async () => 'ok'),
    )
  })

  it('exempts routes with config.ratewindow false, and applies nested registrations both', async () => {
    const app = Fastify()
    await app.register(fastifyRateLimit, { limit: 2 })
    app.get('/', async () => 'ok')
    app.get('/health', { config: { ratewindow: false } }, async () => 'up')
    await app.register(async (child) => {
      await child.register(fastifyRateLimit, { limit: 3 })
      child.get('/nested', async (request) => request.rateLimit?.remaining)
    })
    await app.ready()
    for (let i = 0; i < 5; i++) expect((await app.inject('/health')).statusCode).toBe(200)
    // Both registrations count /nested once each: the outer budget of 2 is now 1.
    expect((await app.inject('/nested')).statusCode).toBe(200)
    expect((await app.inject('/')).statusCode).toBe(200)
    expect((await app.inject('/')).statusCode).toBe(429)
    expect((await app.inject('/nested')).statusCode).toBe(429)
    await app.close()
  })

  it('limits only configured routes with global: false, and calls a custom handler', async () => {
    const app = Fastify()
    await app.register(fastifyRateLimit, {
      global: false,
      handler: async (_request, reply, result) => reply.code(429).send({ custom: result.limit }),
    })
    app.get('/free', async () => 'free')
    app.get(
      '/login',
      { config: { ratewindow: { limit: 1, algorithm: 'sliding-window-log' } } },
      async () => 'in',
    )
    await app.listen({ port: 0, host: '127.0.0.1' })
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
    for (let i = 0; i < 3; i++) await request(url).get('/free').expect(200)
    await request(url).get('/login').expect(200)
    expect((await request(url).get('/login').expect(429)).body).toEqual({ custom: 1 })
    await app.close()
  })

  it('declares its name and supported Fastify range', () => {
    const meta = (fastifyRateLimit as unknown as Record<symbol, { name: string; fastify: string }>)[
      Symbol.for('plugin-meta')
    ]
    expect(meta).toMatchObject({ name: '@ratewindow/fastify', fastify: '4.x || 5.x' })
  })
})

describe.each(FRAMEWORKS)('$name without trust proxy', (framework) => {
  it('warns once when X-Forwarded-For arrives but proxies are not trusted, and keys by the socket', async () => {
    const warnings: Error[] = []
    const listener = (warning: Error) => warnings.push(warning)
    process.on('warning', listener)
    const app = await framework.start({ global: { limit: 2 }, trustProxy: false })
    try {
      // Requests without the header do not settle the question: the first one with it is still judged.
      await request(app.url).get('/').expect(200)
      await new Promise((resolve) => setImmediate(resolve))
      expect(
        warnings.filter((warning) => (warning as { code?: string }).code === 'RATEWINDOW_UNTRUSTED_PROXY'),
      ).toEqual([])
      await request(app.url).get('/').set('X-Forwarded-For', '203.0.113.9').expect(200)
      await request(app.url).get('/').set('X-Forwarded-For', '203.0.113.10').expect(429) // same socket, same bucket
      await new Promise((resolve) => setImmediate(resolve))
      const ours = warnings.filter((warning) =>
        String((warning as { code?: string }).code).startsWith('RATEWINDOW_UNTRUSTED_PROXY'),
      )
      expect(ours).toHaveLength(1)
      expect(ours[0]!.message).toMatch(/trust/)
    } finally {
      process.off('warning', listener)
      await app.close()
    }
  })
})

describe.each(FRAMEWORKS)('$name trusting every proxy hop', (framework) => {
  it('warns once that clients can choose their key, with the fix for this framework', async () => {
    const warnings: Error[] = []
    const listener = (warning: Error) => warnings.push(warning)
    process.on('warning', listener)
    const app = await framework.start({ global: { limit: 5 }, trustProxy: 'every-hop' })
    try {
      await request(app.url).get('/').set('X-Forwarded-For', '203.0.113.9, 198.51.100.1').expect(200)
      await request(app.url).get('/').expect(200)
      await new Promise((resolve) => setImmediate(resolve))
      const ours = warnings.filter(
        (warning) => (warning as { code?: string }).code === 'RATEWINDOW_PERMISSIVE_TRUST_PROXY',
      )
      // Once per process and adapter: the second version of each framework shares its adapter's warning.
      // Hono's setting is each middleware's own `trustProxy`: once per middleware.
      expect(ours).toHaveLength(
        ['Express 5', 'Koa 3', 'Fastify 5', 'Hono 4 on Node'].includes(framework.name) ||
          framework.name.startsWith('Nest')
          ? 1
          : 0,
      )
      const fix = {
        Express: /trust proxy', 1/,
        Koa: /maxIpsCount/,
        Fastify: /Fastify 5/,
        Hono: /`trustProxy`/,
      }
      for (const warning of ours) {
        // Nest's warning names the fix of its platform ('Nest 12 on Express').
        const family = framework.name.startsWith('Nest')
          ? framework.name.split(' ').at(-1)
          : framework.name.split(' ')[0]
        expect(warning.message).toMatch(fix[family as keyof typeof fix])
      }
    } finally {
      process.off('warning', listener)
      await app.close()
    }
  })

  it('keys by the address the framework reports', async () => {
    const app = await framework.start({ global: { limit: 1 }, trustProxy: true })
    try {
      await request(app.url).get('/').set('X-Forwarded-For', '203.0.113.9').expect(200)
      await request(app.url).get('/').set('X-Forwarded-For', '203.0.113.10').expect(200)
      await request(app.url).get('/').set('X-Forwarded-For', '198.51.100.1, 203.0.113.10').expect(429)
    } finally {
      await app.close()
    }
  })
})

describe('what the adapters re-export (issue 20)', () => {
  it('SyncedStore, ConcurrencyLimiter and combineObservers, the same as core (Express, Koa, Fastify, Hono)', async () => {
    const core = await import('@ratewindow/core')
    for (const adapter of [
      await import('@ratewindow/express'),
      await import('@ratewindow/koa'),
      await import('@ratewindow/fastify'),
      await import('@ratewindow/hono'),
    ]) {
      expect(adapter.SyncedStore).toBe(core.SyncedStore)
      expect(adapter.ConcurrencyLimiter).toBe(core.ConcurrencyLimiter)
      expect(adapter.combineObservers).toBe(core.combineObservers)
    }
  })

  // Issue 32: a store of one's own was typed by importing `Store` from @ratewindow/core, a package the app does
  // not depend on. This file is typechecked: a missing export fails `pnpm typecheck`.
  it('`type Store` from every adapter, the same as core', () => {
    const store: CoreStore = new MemoryStore()
    const typed: [ExpressStore, KoaStore, FastifyStore, HonoStore, NestStore, GraphQLStore] = [
      store,
      store,
      store,
      store,
      store,
      store,
    ]
    expect(typed.every((each) => typeof each.consume === 'function')).toBe(true)
  })
})
