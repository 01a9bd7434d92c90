/**
 * A gradual migration from @fastify/rate-limit: both plugins installed and registered on one app, each route
 * limited by the plugin whose key it uses (`config.rateLimit` for @fastify/rate-limit, `config.ratewindow` for
 * ours), and our previous key refused at start-up where @fastify/rate-limit is not there to read it.
 */
import type { AddressInfo } from 'node:net'
import fastifyRateLimit from '@fastify/rate-limit'
import { rateLimit } from '@ratewindow/fastify'
import fastify5, { type FastifyInstance } from 'fastify'
import fastifyRateLimit9 from 'fastify-rate-limit9'
import fastify4 from 'fastify4'
import request from 'supertest'
import { describe, expect, it } from 'vitest'

const VERSIONS = [
  {
    name: 'Fastify 5 + @fastify/rate-limit 11',
    create: (): FastifyInstance => fastify5(),
    legacy: fastifyRateLimit,
  },
  {
    name: 'Fastify 4 + @fastify/rate-limit 9',
    create: () => fastify4() as unknown as FastifyInstance,
    legacy: fastifyRateLimit9 as unknown as typeof fastifyRateLimit,
  },
]

/** Registers the routes, then readies the app: the error of a refused route, or undefined. */
async function startError(app: FastifyInstance, routes: () => void): Promise<unknown> {
  return (async () => {
    routes()
    await app.ready()
  })().then(
    () => undefined,
    (caught: unknown) => caught,
  )
}

describe.each(VERSIONS)('$name', ({ create, legacy }) => {
  it('refuses our previous key config.rateLimit at start-up when @fastify/rate-limit is not registered', async () => {
    for (const routeConfig of [{ limit: 5 }, false]) {
      for (const global of [true, false]) {
        const app = create()
        await app.register(rateLimit, { limit: 100, global })
        const error = await startError(app, () => {
          app.get('/login', { config: { rateLimit: routeConfig } as never }, async () => 'ok')
        })
        expect(error).toMatchObject({
          name: 'RateLimitError',
          code: 'ERR_RATEWINDOW_UNKNOWN_OPTION',
          option: 'config.rateLimit',
        })
        expect((error as Error).message).toContain(
          "`config.rateLimit` of GET /login is @fastify/rate-limit's key; @ratewindow/fastify reads `config.ratewindow`",
        )
        await app.close().catch(() => undefined)
      }
    }
  })

  it('refuses config.rateLimit in a context where @fastify/rate-limit is registered only in a sibling', async () => {
    const app = create()
    await app.register(rateLimit, { limit: 100 })
    await app.register(async (legacyPart) => {
      await legacyPart.register(legacy, { max: 100, timeWindow: 60_000 })
      legacyPart.get('/old', { config: { rateLimit: { max: 5 } } as never }, async () => 'old')
    })
    const error = await startError(app, () => {
      app.register(async (other) => {
        other.get('/other', { config: { rateLimit: { max: 5 } } as never }, async () => 'other')
      })
    })
    expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option: 'config.rateLimit' })
    expect((error as Error).message).toContain('GET /other')
    await app.close().catch(() => undefined)
  })

  it('limits each route by the plugin whose key it uses, both registered on one app (over HTTP)', async () => {
    const app = create()
    await app.register(legacy, { global: false, max: 100, timeWindow: 60_000 })
    await app.register(rateLimit, { global: false, limit: 100, window: '1m' })
    app.get('/old', { config: { rateLimit: { max: 2, timeWindow: 60_000 } } as never }, async (req) => ({
      ours: req.rateLimit,
    }))
    app.get('/new', { config: { ratewindow: { limit: 3 } } }, async (req) => ({
      remaining: req.rateLimit?.remaining,
    }))
    app.get('/free', async () => 'free')
    await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`

      // /old: @fastify/rate-limit's budget of 2, its x-ratelimit-* headers, ratewindow not involved.
      for (const remaining of ['1', '0']) {
        const allowed = await request(url).get('/old').expect(200)
        expect(allowed.headers['x-ratelimit-limit']).toBe('2')
        expect(allowed.headers['x-ratelimit-remaining']).toBe(remaining)
        expect(allowed.headers['ratelimit-policy']).toBeUndefined()
        expect(allowed.body).toEqual({ ours: null })
      }
      const deniedOld = await request(url).get('/old').expect(429)
      expect(deniedOld.headers['x-ratelimit-limit']).toBe('2')
      expect(deniedOld.headers['ratelimit-policy']).toBeUndefined()

      // /new: ratewindow's budget of 3, its RateLimit-* headers, @fastify/rate-limit not involved.
      for (const remaining of [2, 1, 0]) {
        const allowed = await request(url).get('/new').expect(200)
        expect(allowed.body).toEqual({ remaining })
        expect(allowed.headers['ratelimit-limit']).toBe('3')
        expect(allowed.headers['x-ratelimit-limit']).toBeUndefined()
      }
      const deniedNew = await request(url).get('/new').expect(429)
      expect(deniedNew.headers['ratelimit-remaining']).toBe('0')
      expect(deniedNew.headers['x-ratelimit-limit']).toBeUndefined()

      // A route with neither key is limited by neither (both plugins have global: false).
      for (let i = 0; i < 5; i++) {
        const free = await request(url).get('/free').expect(200)
        expect(free.headers['x-ratelimit-limit']).toBeUndefined()
        expect(free.headers['ratelimit-limit']).toBeUndefined()
      }
    } finally {
      await app.close()
    }
  })
})
