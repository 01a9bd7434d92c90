/**
 * Issue 19, item 8: Fastify's not-found handlers (the default 404 and `setNotFoundHandler`, e.g. an SPA
 * fallback or a catch-all proxy) are limited like any route by a global registration.
 */
import { type FastifyRateLimitOptions, rateLimit } from '@ratewindow/fastify'
import fastify5, { type FastifyInstance } from 'fastify'
import fastify4 from 'fastify4'
import { afterEach, describe, expect, it } from 'vitest'

describe.each([
  ['Fastify 5', fastify5],
  ['Fastify 4', fastify4 as unknown as typeof fastify5],
])('%s', (_, create) => {
  let app: FastifyInstance | undefined
  afterEach(async () => {
    await app?.close()
    app = undefined
  })

  async function start(
    options: FastifyRateLimitOptions,
    routes?: (app: FastifyInstance) => void,
  ): Promise<FastifyInstance> {
    app = create()
    await app.register(rateLimit, options)
    app.get('/', async () => 'ok')
    app.get('/open', { config: { ratewindow: false } }, async () => 'open')
    routes?.(app)
    await app.ready()
    return app
  }

  const statuses = async (url: string, count: number) => {
    const codes: number[] = []
    for (let i = 0; i < count; i++) codes.push((await app!.inject(url)).statusCode)
    return codes
  }

  it("limits Fastify's default 404", async () => {
    await start({ limit: 3 })
    expect(await statuses('/nope', 4)).toEqual([404, 404, 404, 429])
  })

  it('limits a custom not-found handler (an SPA fallback) like any route', async () => {
    await start({ limit: 3 }, (app) => app.setNotFoundHandler(async () => 'index.html'))
    expect(await statuses('/some/page', 4)).toEqual([200, 200, 200, 429])
    const denied = await app!.inject('/other/page')
    expect(denied.statusCode).toBe(429)
    expect(denied.headers['retry-after']).toBeDefined()
  })

  it('limits a preHandler registration too, and counts a request once', async () => {
    await start({ limit: 3, hook: 'preHandler' }, (app) => app.setNotFoundHandler(async () => 'fallback'))
    expect(await statuses('/', 2)).toEqual([200, 200])
    expect(await statuses('/missing', 2)).toEqual([200, 429]) // 3 in all: the 404s share the client's limit
    expect(await statuses('/open', 2)).toEqual([200, 200]) // a route exempted stays exempt
  })

  it('`notFound: false` leaves 404s unlimited; routes stay limited', async () => {
    await start({ limit: 3, notFound: false }, (app) => app.setNotFoundHandler(async () => 'fallback'))
    expect(await statuses('/missing', 5)).toEqual([200, 200, 200, 200, 200])
    expect(await statuses('/', 4)).toEqual([200, 200, 200, 429])
  })

  it('`config: { ratewindow: false }` given to setNotFoundHandler exempts it', async () => {
    await start({ limit: 3 }, (app) =>
      app.setNotFoundHandler({ config: { ratewindow: false } } as never, async () => 'fallback'),
    )
    expect(await statuses('/missing', 5)).toEqual([200, 200, 200, 200, 200])
  })

  it('`global: false` limits 404s only when `notFound: true` says so', async () => {
    await start({ limit: 3, global: false })
    expect(await statuses('/missing', 5)).toEqual([404, 404, 404, 404, 404])
    await app!.close()
    await start({ limit: 3, global: false, notFound: true })
    expect(await statuses('/missing', 4)).toEqual([404, 404, 404, 429])
    expect(await statuses('/', 2)).toEqual([200, 200]) // routes are still not limited
  })

  it('refuses a `notFound` that is not a boolean, naming it', async () => {
    app = create()
    await expect(app.register(rateLimit, { notFound: 'yes' as never })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      option: 'notFound',
    })
  })
})
