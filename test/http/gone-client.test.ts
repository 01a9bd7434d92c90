/**
 * A client that leaves before the limiter runs (issue 32, item 13): an earlier middleware is still working (a
 * session lookup, a body read) when the connection closes, and with it goes the client's address. Such a request
 * is not decided (nor counted by slowDown()): no `ERR_RATEWINDOW_INVALID_IP` in the app's error handler (any client could flood the logs with
 * it), nothing counted, no handler run, nothing logged. Real servers, real sockets, every adapter on Node.
 */
import { once } from 'node:events'
import type { Server } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { MemoryStore } from '@ratewindow/core'
import { rateLimit as expressRateLimit, slowDown as expressSlowDown } from '@ratewindow/express'
import { rateLimit as fastifyRateLimit, slowDown as fastifySlowDown } from '@ratewindow/fastify'
import { rateLimit as honoRateLimit, slowDown as honoSlowDown } from '@ratewindow/hono'
import { rateLimit as koaRateLimit, slowDown as koaSlowDown } from '@ratewindow/koa'
import express5 from 'express'
import express4 from 'express4'
import fastify5 from 'fastify'
import fastify4 from 'fastify4'
import { Hono } from 'hono'
import Koa3 from 'koa'
import Koa2 from 'koa2'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { until } from '../support/connections.js'

/** What the server saw, per test. */
const seen = { entered: 0, passed: 0, handled: 0, errors: [] as unknown[] }
const warnings: Error[] = []
const onWarning = (warning: Error) => void warnings.push(warning)
beforeAll(() => process.on('warning', onWarning))
afterAll(() => process.off('warning', onWarning))

/** Resolves when `socket` has closed: the earlier middleware's work ends after its client left. */
function closed(socket: { destroyed?: boolean; once(event: 'close', listener: () => void): unknown }) {
  return socket.destroyed ? Promise.resolve() : new Promise<void>((resolve) => socket.once('close', resolve))
}

/** The middleware under test: rateLimit() (limit 5), or slowDown() (delays after 5). */
type Kind = 'rateLimit' | 'slowDown'

interface Running {
  url: string
  port: number
  close(): Promise<void>
}

/** Each framework: the earlier middleware that waits for its client to leave, the limiter, a handler. */
const FRAMEWORKS: [string, (store: MemoryStore, kind: Kind) => Promise<Running>][] = [
  ...(
    [
      ['Express 5', express5],
      ['Express 4', express4],
    ] as const
  ).map(
    ([name, express]) =>
      [
        name,
        async (store: MemoryStore, kind: Kind) => {
          const app = express()
          app.use(async (request, _response, next) => {
            seen.entered++
            if (request.headers['x-leave']) await closed(request.socket)
            next()
            seen.passed++
          })
          if (kind === 'rateLimit') app.use(expressRateLimit({ limit: 5, window: '1m', store }))
          else app.use(expressSlowDown({ delayAfter: 5, windowMs: 60_000, store }))
          app.get('/', (_request, response) => {
            seen.handled++
            response.send('ok')
          })
          app.use(
            (
              error: unknown,
              _request: unknown,
              response: { status(code: number): { end(): void } },
              _next: unknown,
            ) => {
              seen.errors.push(error)
              response.status(500).end()
            },
          )
          return listening(app.listen(0, '127.0.0.1'))
        },
      ] as [string, (store: MemoryStore, kind: Kind) => Promise<Running>],
  ),
  ...(
    [
      ['Koa 3', Koa3],
      ['Koa 2', Koa2],
    ] as const
  ).map(
    ([name, Koa]) =>
      [
        name,
        async (store: MemoryStore, kind: Kind) => {
          const app = new (Koa as typeof Koa3)()
          app.on('error', (error) => seen.errors.push(error))
          app.use(async (ctx, next) => {
            try {
              seen.entered++
              if (ctx.get('x-leave')) await closed(ctx.req.socket)
              await next()
            } catch (error) {
              seen.errors.push(error)
            } finally {
              seen.passed++
            }
          })
          if (kind === 'rateLimit') app.use(koaRateLimit({ limit: 5, window: '1m', store }))
          else app.use(koaSlowDown({ delayAfter: 5, windowMs: 60_000, store }))
          app.use((ctx) => {
            seen.handled++
            ctx.body = 'ok'
          })
          return listening(app.listen(0, '127.0.0.1'))
        },
      ] as [string, (store: MemoryStore, kind: Kind) => Promise<Running>],
  ),
  [
    'Hono 4 on Node',
    async (store, kind) => {
      const app = new Hono<{ Bindings: { incoming: { socket: Socket } } }>()
      app.onError((error, c) => {
        seen.errors.push(error)
        return c.text('error', 500)
      })
      app.use(async (c, next) => {
        seen.entered++
        if (c.req.header('x-leave')) await closed(c.env.incoming.socket)
        await next()
        seen.passed++
      })
      if (kind === 'rateLimit') app.use(honoRateLimit({ limit: 5, window: '1m', store, getConnInfo }))
      else app.use(honoSlowDown({ delayAfter: 5, windowMs: 60_000, store, getConnInfo }))
      app.get('/', (c) => {
        seen.handled++
        return c.text('ok')
      })
      return listening(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server)
    },
  ],
  ...(
    [
      ['Fastify 5', fastify5],
      ['Fastify 4', fastify4],
    ] as const
  ).map(
    ([name, create]) =>
      [
        name,
        async (store: MemoryStore, kind: Kind) => {
          const app = (create as typeof fastify5)()
          app.setErrorHandler((error, _request, reply) => {
            seen.errors.push(error)
            return reply.code(500).send('error')
          })
          app.addHook('onRequest', async (request) => {
            seen.entered++
            if (request.headers['x-leave']) await closed(request.raw.socket)
          })
          if (kind === 'rateLimit') await app.register(fastifyRateLimit, { limit: 5, window: '1m', store })
          else {
            const slowDown = fastifySlowDown({ delayAfter: 5, windowMs: 60_000, store })
            // A request slowDown() ends without an answer (its client gone) sends nothing: its work ends here.
            app.addHook('onRequest', function (request, reply, done) {
              slowDown.call(this, request, reply, (error?: Error) => {
                if (reply.sent) seen.passed++
                done(error)
              })
            })
          }
          // The limiter's answer to a gone client is sent (to nobody): that is where its work ends.
          app.addHook('onSend', async () => {
            seen.passed++
          })
          app.get('/', async () => {
            seen.handled++
            return 'ok'
          })
          await app.listen({ port: 0, host: '127.0.0.1' })
          const { port } = app.server.address() as AddressInfo
          return { url: `http://127.0.0.1:${port}`, port, close: () => app.close() }
        },
      ] as [string, (store: MemoryStore, kind: Kind) => Promise<Running>],
  ),
]

async function listening(server: Server): Promise<Running> {
  if (!server.listening) await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/**
 * Sends GET / on a raw connection and closes it as soon as the server's earlier middleware is working on it
 * (`X-Leave`: the earlier middleware works until the connection is closed).
 */
async function leaveEarly(port: number): Promise<void> {
  const entered = seen.entered
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Leave: 1\r\n\r\n')
  await until(() => seen.entered > entered, 'the earlier middleware works on the request')
  socket.destroy()
}

/** Each middleware under test: what its test is named and says, and what it checks of a client that stays. */
const MIDDLEWARES: {
  kind: Kind
  runs: string
  test: string
  stays(answer: Response, store: MemoryStore): void
}[] = [
  {
    kind: 'rateLimit',
    runs: 'the limiter',
    test: 'is not decided: no error, nothing counted, no handler, nothing logged (20 clients; regression: 20 ERR_RATEWINDOW_INVALID_IP)',
    // A client that stays is decided as before.
    stays: (answer) =>
      expect(answer.headers.get('ratelimit-remaining') ?? answer.headers.get('ratelimit')).toMatch(/4/),
  },
  {
    kind: 'slowDown',
    runs: 'slowDown()',
    test: 'is not counted, runs no handler and logs nothing (20 clients; regression: 20 ERR_RATEWINDOW_INVALID_IP, then 20 handlers run)',
    // A client that stays is counted as before.
    stays: (_answer, store) => expect(store.size).toBe(1),
  },
]

describe.each(
  FRAMEWORKS.flatMap(([name, start]) =>
    MIDDLEWARES.map((middleware) => [name, middleware.runs, start, middleware] as const),
  ),
)('%s: a client gone before %s runs', (_name, _runs, start, { kind, runs, test, stays }) => {
  let running: Running | undefined
  afterEach(async () => {
    vi.restoreAllMocks()
    await running?.close()
    seen.entered = seen.passed = seen.handled = 0
    seen.errors = []
    warnings.length = 0
  })

  it(test, async () => {
    const logged = vi.spyOn(console, 'error')
    const store = new MemoryStore()
    running = await start(store, kind)
    for (let i = 0; i < 20; i++) await leaveEarly(running.port)
    await until(
      () => seen.passed === 20,
      () => `every request went past ${runs} (${seen.passed} passed, ${seen.errors.length} errors)`,
    )
    expect(seen.errors).toEqual([])
    expect(seen.handled).toBe(0)
    expect(store.size).toBe(0)
    await new Promise((resolve) => setImmediate(resolve))
    expect(logged).not.toHaveBeenCalled()
    expect(warnings).toEqual([])
    const answer = await fetch(running.url)
    expect(answer.status).toBe(200)
    stays(answer, store)
  })
})
