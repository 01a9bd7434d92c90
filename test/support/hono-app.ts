/**
 * The Hono app of the HTTP tests, its routes written once: test/http/harness.ts serves it on `@hono/node-server`
 * (the Node matrix), test/runtimes/suite-scenarios.ts on Node, Bun, Deno and workerd. The caller makes the
 * middlewares (with its runtime's client address options) and the parked routes (test/support/parked.ts); this
 * module lays out the routes. It imports only `hono` (and types): the runtime programs bundle it.
 *
 * Routes:
 * - GET / and /other: "ok", both limited by `shared`.
 * - GET /fail: 500 "failed".
 * - GET /limited: "limited route", limited by `route`.
 * - GET /a, /b, /c, /login: "ok <path>", each limited by its entry of `routes`.
 * - GET /state: the result the middleware set (`c.get('rateLimit')`) as JSON, null when unset.
 * - GET /settle?n=: settles the request's actual cost at n; answers what `settle` did.
 * - GET /hold: "held" once `parked.hold()` resolves.
 * - GET /work: "done" once `parked.work(signal)` resolves, also when its client left (the handler ends its
 *   response); `signal` is the request's, which aborts when the client leaves.
 * - GET /slow: with `slowDown`, the request's slow-down info as JSON (GET /slow-fail: the same, with 500);
 *   without it, "late" once `parked.slow()` resolves.
 * - POST /reset/:key and /reset-me: the reset handle of `shared`, else of `global`.
 *
 * `global` limits every route. A thrown error answers 500 with its `code` (or message) as JSON.
 */
import type { RateLimitEnv, RateLimitMiddleware, SlowDownEnv, SlowDownMiddleware } from '@ratewindow/hono'
import { type Context, Hono } from 'hono'

/** The routes with a limiter of their own besides `/limited`. */
export type HonoPath = '/a' | '/b' | '/c' | '/login'

export interface HonoTestApp {
  /** On every route. */
  global?: RateLimitMiddleware
  /** On GET /limited. */
  route?: RateLimitMiddleware
  /** On each of these routes, its own. */
  routes?: Partial<Record<HonoPath, RateLimitMiddleware>>
  /** One middleware on GET / and /other, whose handle the reset routes use. */
  shared?: RateLimitMiddleware
  /** `slowDown()` on GET /slow and /slow-fail. */
  slowDown?: SlowDownMiddleware
  /** The routes that wait for the test: each resolves when the test lets the request go. */
  parked: {
    hold(): Promise<void>
    work(signal: AbortSignal | undefined): Promise<void>
    /** GET /slow without `slowDown`; unset, no such route. */
    slow?(): Promise<void>
  }
}

type ErrorWithCode = Error & { code?: string }

/** Hono error handler: a thrown error answers 500 with its code (or message) as JSON. */
export function honoErrorsAsJson(error: ErrorWithCode, c: Context): Response {
  return c.json({ error: error.code ?? error.message }, 500)
}

/** The Hono test app with these middlewares and parked routes (see the module's comment for its routes). */
export function honoTestApp({ global, route, routes = {}, shared, slowDown, parked }: HonoTestApp) {
  const app = new Hono<RateLimitEnv>()
  app.onError(honoErrorsAsJson)
  if (global) app.use(global)
  const ok = (c: Context) => c.text('ok')
  for (const path of ['/', '/other']) {
    if (shared) app.get(path, shared, ok)
    else app.get(path, ok)
  }
  app.get('/fail', (c) => c.text('failed', 500))
  const limited = (c: Context) => c.text('limited route')
  if (route) app.get('/limited', route, limited)
  else app.get('/limited', limited)
  for (const path of ['/a', '/b', '/c', '/login'] as const) {
    const limiter = routes[path]
    const answer = (c: Context) => c.text(`ok ${path}`)
    if (limiter) app.get(path, limiter, answer)
    else app.get(path, answer)
  }
  app.get('/state', (c) => c.json(c.get('rateLimit') ?? null))
  app.get('/settle', async (c) =>
    c.json((await c.get('rateLimit')?.settle?.(Number(c.req.query('n')))) ?? null),
  )
  app.get('/hold', async (c) => {
    await parked.hold()
    return c.text('held')
  })
  app.get('/work', async (c) => {
    await parked.work(c.req.raw.signal as AbortSignal | undefined)
    return c.text('done')
  })
  if (slowDown) {
    const info = (c: Context) => (c as unknown as Context<SlowDownEnv>).get('slowDown') ?? null
    app.get('/slow', slowDown, (c) => c.json(info(c)))
    app.get('/slow-fail', slowDown, (c) => c.json(info(c), 500))
  } else if (parked.slow) {
    const { slow } = parked
    app.get('/slow', async (c) => {
      await slow()
      return c.text('late')
    })
  }
  const resetting = shared ?? global
  app.post('/reset/:key', async (c) => {
    await resetting!.resetKey(c.req.param('key'))
    return c.text('reset')
  })
  app.post('/reset-me', async (c) => {
    await resetting!.reset(c)
    return c.text('reset')
  })
  return app
}
