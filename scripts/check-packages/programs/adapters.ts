/** Typecheck programs of the HTTP adapters: Express, Koa, Hono, Fastify, and Fastify beside @fastify/rate-limit. */

export const EXPRESS_PROGRAM = `import express from 'express'
import { rateLimit, type RateLimitResult, type SlowDownInfo, slidingWindowLog, slowDown } from '@ratewindow/express'

const app = express()
app.set('trust proxy', 1)
app.use(rateLimit({ limit: 100, window: '1m', key: (request) => request.ip ?? 'unknown' }))
app.use(slowDown({ windowMs: 900_000, delayAfter: 5, delayMs: (used, request) => (used - 5) * (request.ip ? 100 : 200), maxDelayMs: 2000 }))
app.post(
  '/login',
  rateLimit({ rules: slidingWindowLog({ limit: 5, window: '15m' }), prefix: 'login' }),
  (request, response) => {
    const decision: RateLimitResult | undefined = request.rateLimit
    const slowed: SlowDownInfo | undefined = request.slowDown
    response.json({ remaining: decision?.remaining, delay: slowed?.delay })
  },
)
export { app }
`

export const KOA_PROGRAM = `import Koa from 'koa'
import { rateLimit, type RateLimitResult, type SlowDownInfo, slowDown } from '@ratewindow/koa'

const app = new Koa()
app.use(rateLimit({ limit: 100, window: '1m', key: (ctx) => ctx.ip }))
app.use(slowDown({ delayAfter: 5, delayMs: (used, ctx) => (used - 5) * (ctx.ip ? 100 : 200), maxDelayMs: 2000 }))
app.use((ctx) => {
  const decision: RateLimitResult | undefined = ctx.state.rateLimit
  const slowed: SlowDownInfo | undefined = ctx.state.slowDown
  ctx.body = { remaining: decision?.remaining, delay: slowed?.delay }
})
export { app }
`

export const HONO_PROGRAM = `import { getConnInfo } from '@hono/node-server/conninfo'
import { type RateLimitEnv, type RateLimitResult, rateLimit, type SlowDownEnv, slidingWindowLog, slowDown } from '@ratewindow/hono'
import { Hono } from 'hono'

const app = new Hono<RateLimitEnv & SlowDownEnv>()
app.use(rateLimit({ limit: 100, window: '1m', getConnInfo, trustProxy: 1 }))
app.use(slowDown({ delayAfter: 5, delayMs: (used, c) => (used - 5) * (c.req.header('x-user') ? 100 : 200), getConnInfo }))
app.get('/slow', (c) => c.json({ delay: c.get('slowDown')?.delay }))
app.post(
  '/login',
  rateLimit({ rules: slidingWindowLog({ limit: 5, window: '15m' }), prefix: 'login', key: (c) => c.req.header('x-user') ?? 'anonymous' }),
  (c) => {
    const decision: RateLimitResult | undefined = c.get('rateLimit')
    return c.json({ remaining: decision?.remaining })
  },
)
export { app }
`

export const FASTIFY_PROGRAM = `import Fastify from 'fastify'
import { rateLimit, type RateLimitResult, type SlowDownInfo, slidingWindowLog, slowDown } from '@ratewindow/fastify'

export async function build() {
  const app = Fastify()
  await app.register(rateLimit, { limit: 100, window: '1m', key: (request) => request.ip })
  app.addHook('onRequest', slowDown({ delayAfter: 5, delayMs: (used, request) => (used - 5) * (request.ip ? 100 : 200) }))
  app.get('/slow', async (request) => {
    const slowed: SlowDownInfo | undefined = request.slowDown
    return { delay: slowed?.delay }
  })
  app.get('/', async (request) => {
    const decision: RateLimitResult | null = request.rateLimit
    return { remaining: decision?.remaining }
  })
  app.post(
    '/login',
    { config: { ratewindow: { rules: slidingWindowLog({ limit: 5, window: '15m' }) } } },
    async () => 'ok',
  )
  app.get('/health', { config: { ratewindow: false } }, async () => 'up')
  return app
}
`

/** A gradual migration: @fastify/rate-limit on one part of the app, @ratewindow/fastify on another. */
export const FASTIFY_MIGRATION_PROGRAM = `import Fastify from 'fastify'
import fastifyRateLimit from '@fastify/rate-limit'
import { rateLimit } from '@ratewindow/fastify'

export async function build() {
  const app = Fastify()
  await app.register(async (legacy) => {
    await legacy.register(fastifyRateLimit, { max: 100, timeWindow: '1 minute' })
    legacy.get('/old', async () => 'old')
    legacy.get('/old/login', { config: { rateLimit: { max: 5, timeWindow: '15 minutes' } } }, async () => 'ok')
  })
  await app.register(async (migrated) => {
    await migrated.register(rateLimit, { limit: 100, window: '1m' })
    migrated.get('/new', async (request) => ({ remaining: request.rateLimit?.remaining }))
    migrated.get('/new/login', { config: { ratewindow: { limit: 5, window: '15m' } } }, async () => 'ok')
    migrated.get('/new/health', { config: { ratewindow: false } }, async () => 'up')
  })
  // Both on one instance, each route keyed for one of them.
  await app.register(async (both) => {
    await both.register(fastifyRateLimit, { global: false, max: 100, timeWindow: '1 minute' })
    await both.register(rateLimit, { global: false, limit: 100, window: '1m' })
    both.get('/both/old', { config: { rateLimit: { max: 5 } } }, async () => 'old')
    both.get('/both/new', { config: { ratewindow: { limit: 5 } } }, async () => 'new')
  })
  return app
}
`
