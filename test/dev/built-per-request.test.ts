/**
 * A middleware built inside a request handler (issue 32, item 10): with the default store it never limits, and on
 * a shared store each one takes the counters over from the last. Both are said once per process, with the fix;
 * the layouts that are right (an app per test, route limiters with equal options, one middleware built lazily)
 * are not warned about. Real Express and Koa servers.
 */
import { once } from 'node:events'
import { createServer, type RequestListener, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { MemoryStore } from '@ratewindow/core'
import { rateLimit as expressRateLimit, type RateLimitMiddleware } from '@ratewindow/express'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import express, { type RequestHandler } from 'express'
import Koa from 'koa'
import { afterAll, afterEach, describe, expect, it } from 'vitest'

const warnings: (Error & { code?: string })[] = []
const onWarning = (warning: Error) => void warnings.push(warning)
process.on('warning', onWarning)
afterAll(() => {
  process.off('warning', onWarning)
})

const servers: Server[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))))
  warnings.length = 0
})

async function listen(handler: RequestListener): Promise<string> {
  const server = createServer(handler)
  servers.push(server)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** `count` GET requests to `url`, `parallel` at a time; their statuses, in order of sending. */
async function statuses(url: string, count: number, parallel = 1): Promise<number[]> {
  const answers: number[] = []
  for (let sent = 0; sent < count; sent += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - sent) }, () => fetch(url))
    for (const response of await Promise.all(batch)) {
      answers.push(response.status)
      await response.arrayBuffer()
    }
  }
  return answers
}

/** The process warnings of ratewindow seen so far (emitted on the next tick), by code. */
async function warned(): Promise<Record<string, number>> {
  await new Promise((resolve) => setImmediate(resolve))
  const counts: Record<string, number> = {}
  for (const warning of warnings)
    if (warning.code?.startsWith('RATEWINDOW_')) counts[warning.code] = (counts[warning.code] ?? 0) + 1
  return counts
}

/** An Express app answering GET / with `limiter` in front of the handler. */
function expressApp(limiter: RequestHandler) {
  const app = express()
  app.get('/', limiter, (_request, response) => {
    response.send('ok')
  })
  return app
}

/** A Koa app that builds its middleware with `build` for each request, after an earlier async step when `late`. */
function koaPerRequest(build: () => ReturnType<typeof koaRateLimit>, late: boolean) {
  const app = new Koa()
  app.use(async (ctx, next) => {
    const limiter = build()
    if (late) await new Promise((resolve) => setImmediate(resolve)) // an earlier async step: the session, the user
    return limiter(ctx, next)
  })
  app.use((ctx) => {
    ctx.body = 'ok'
  })
  return app.callback() as RequestListener
}

describe('middlewares built where they should be: no warning', () => {
  it('an app built per test (50 apps, one request each), three route limiters with equal options, one built lazily', async () => {
    for (let i = 0; i < 50; i++) {
      const url = await listen(expressApp(expressRateLimit({ limit: 5, window: '1m' })))
      expect(await statuses(url, 1)).toEqual([200])
    }
    const app = express()
    for (const path of ['/a', '/b', '/c'])
      app.get(path, expressRateLimit({ limit: 5, window: '1m' }), (_request, response) => {
        response.send('ok')
      })
    let lazy: RateLimitMiddleware | undefined
    app.get('/lazy', (request, response, next) => {
      lazy ??= expressRateLimit({ limit: 5, window: '1m' })
      lazy(request, response, next)
    })
    app.get('/lazy', (_request, response) => {
      response.send('ok')
    })
    const url = await listen(app)
    for (const path of ['/a', '/b', '/c']) expect(await statuses(`${url}${path}`, 2)).toEqual([200, 200])
    expect(await statuses(`${url}/lazy`, 6)).toEqual([200, 200, 200, 200, 200, 429])
    expect(await warned()).toEqual({})
  })
})

describe('a middleware built inside the request handler', () => {
  it('Express, default store: never limits (50 of 50 at limit 5), and says so once, with the fix', async () => {
    const url = await listen(
      expressApp((request, response, next) =>
        expressRateLimit({ limit: 5, window: '1m' })(request, response, next),
      ),
    )
    expect((await statuses(url, 50)).filter((status) => status === 200)).toHaveLength(50)
    expect(await warned()).toEqual({ RATEWINDOW_LIMITER_PER_REQUEST: 1 })
    const [warning] = warnings.filter((each) => each.code === 'RATEWINDOW_LIMITER_PER_REQUEST')
    expect(warning!.message).toMatch(/built anew for each request.*no client is ever limited/s)
    expect(warning!.message).toMatch(/Build the middleware once.*`const limiter = rateLimit\(\{ … \}\)`/s)
  })

  it('Koa, shared store, deciding after an earlier await: limits, and one warning per cause for 1,000 requests (regression: 999)', async () => {
    const store = new MemoryStore()
    const url = await listen(koaPerRequest(() => koaRateLimit({ limit: 5, window: '1m', store }), true))
    const answers = await statuses(url, 1_000, 20)
    expect(answers.filter((status) => status === 200)).toHaveLength(5)
    const counts = await warned()
    expect(counts.RATEWINDOW_LIMITER_PER_REQUEST).toBe(1)
    expect(counts.RATEWINDOW_SUPERSEDED_LIMITER ?? 0).toBeLessThanOrEqual(1)
    const [warning] = warnings.filter((each) => each.code === 'RATEWINDOW_LIMITER_PER_REQUEST')
    expect(warning!.message).toMatch(/count on the `store` you passed.*Build the middleware once/s)
  })

  it('once per process and cause: Koa on the default store, Express on a shared one, say nothing more', async () => {
    const koa = await listen(koaPerRequest(() => koaRateLimit({ limit: 5, window: '1m' }), false))
    expect((await statuses(koa, 20)).filter((status) => status === 200)).toHaveLength(20)
    const store = new MemoryStore()
    const app = express()
    app.get('/', async (request, response, next) => {
      const limiter = expressRateLimit({ limit: 5, window: '1m', store })
      await new Promise((resolve) => setImmediate(resolve))
      limiter(request, response, next)
    })
    app.get('/', (_request, response) => {
      response.send('ok')
    })
    expect((await statuses(await listen(app), 20, 5)).filter((status) => status === 200)).toHaveLength(5)
    expect((await warned()).RATEWINDOW_LIMITER_PER_REQUEST).toBeUndefined()
  })
})
