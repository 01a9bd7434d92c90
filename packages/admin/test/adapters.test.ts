/**
 * The admin endpoint on the adapters' own limiters: an Express `rateLimit()` middleware given as it is (memory
 * store), and Fastify's handle `app.ratewindow.overrides({ name })` (Redis). A block, an override and a reset through
 * HTTP, each honoured at the middleware's next decision; `/stats` fed by the middleware's `observer`.
 */
import type { AddressInfo } from 'node:net'
import { RedisStore } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import express from 'express'
import fastify from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { expressAdmin } from '../src/express.js'
import { fastifyAdmin } from '../src/fastify.js'
import { type AdminHandler, adminHandler, adminStats } from '../src/index.js'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

const authorize = (request: Request) => request.headers.get('authorization') === 'Bearer t'

/** The operator's session against `url`: block, check, override, check, reset, check; the app's statuses. */
async function operate(url: string): Promise<number[]> {
  const headers = { authorization: 'Bearer t', 'content-type': 'application/json' }
  const post = (path: string, body: unknown) =>
    fetch(`${url}/_rw${path}`, { method: 'POST', headers, body: JSON.stringify(body) }).then((r) => r.status)
  const call = () => fetch(`${url}/api`, { headers: { 'x-key': 'k' } }).then((r) => r.status)
  const statuses: number[] = []
  statuses.push(await call(), await call(), await call()) // 200 200 429
  statuses.push(await post('/limiters/api/keys/k/reset', {}), await call()) // 200 200
  statuses.push(await post('/limiters/api/keys/k/block', { for: '1h' }), await call()) // 200 429
  statuses.push(
    await post('/limiters/api/keys/k/unblock', {}),
    await post('/limiters/api/overrides/k', { override: { limit: 4 } }),
  )
  statuses.push(await call(), await call(), await call(), await call()) // 200 200 200 429 (1 + 3 of 4)
  return statuses
}

const EXPECTED = [200, 200, 429, 200, 200, 200, 429, 200, 200, 200, 200, 200, 429]

async function stats(url: string) {
  const response = await fetch(`${url}/_rw/stats`, { headers: { authorization: 'Bearer t' } })
  return response.json()
}

describe('the adapters’ limiters', () => {
  it('Express: the rateLimit() middleware, given as it is', async () => {
    const view = adminStats()
    const limiter = expressRateLimit({
      limit: 2,
      window: '1h',
      name: 'api',
      overrides: true,
      key: (request) => request.get('x-key') ?? '',
      observer: view,
    })
    cleanups.push(() => limiter.close())
    const admin = adminHandler({ limiters: [limiter], authorize, stats: view, basePath: '/_rw' })
    const app = express()
    app.use(expressAdmin(admin))
    app.get('/api', limiter, (_request, response) => void response.send('ok'))
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

    expect(await operate(url)).toEqual(EXPECTED)
    expect(await stats(url)).toMatchObject({
      decisions: { api: { allowed: 6, refused: 3 } },
      refused: [{ limiter: 'api', key: 'k', count: 3 }],
    })
  })

  it('Fastify on Redis: the handle app.ratewindow.overrides({ name })', async () => {
    const view = adminStats()
    const app = fastify()
    cleanups.push(() => app.close())
    // The limiter in a context of its own: the admin routes, registered beside it, are not counted by it.
    await app.register(async (api) => {
      await api.register(fastifyRateLimit, {
        limit: 2,
        window: '1h',
        name: 'api',
        overrides: true,
        store: new RedisStore({ client: standaloneClient() }),
        prefix: uniquePrefix(),
        key: (request) => String(request.headers['x-key'] ?? ''),
        observer: view,
      })
      api.get('/api', async () => 'ok')
    })
    const admin: AdminHandler = adminHandler({
      limiters: [app.ratewindow.overrides({ name: 'api' })],
      authorize,
      stats: view,
      basePath: '/_rw',
    })
    await app.register(fastifyAdmin(admin))
    await app.listen({ port: 0, host: '127.0.0.1' })
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`

    expect(await operate(url)).toEqual(EXPECTED)
    expect((await stats(url)).decisions).toEqual({ api: { allowed: 6, refused: 3 } })
  })
})
