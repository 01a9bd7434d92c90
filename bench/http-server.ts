/**
 * One benchmark server in its own process, so the load generator does not share its event loop.
 * argv: <framework> <variant> <path: allowed|denied>. Prints `{"port":N}` once listening on 127.0.0.1.
 * Variants: bare, ratewindow (memory store), ratewindow-redis (REDIS_URL), and the peers in peers.ts.
 */
import type { AddressInfo } from 'node:net'
import { type HttpRateLimitOptions, MemoryStore, RedisStore } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import express from 'express'
import Fastify from 'fastify'
import { Redis } from 'ioredis'
import Koa from 'koa'
import { peerMiddleware } from './peers.js'

const [framework = 'express', variant = 'bare', path = 'allowed'] = process.argv.slice(2)
const limit = path === 'allowed' ? 100_000_000 : 1
const redis = () =>
  new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { enableAutoPipelining: false })
const ours = (): HttpRateLimitOptions<unknown> | undefined => {
  if (variant === 'ratewindow')
    return { limit, window: '1m', store: new MemoryStore({ maxKeys: 1_000_000 }), blockedCache: false }
  if (variant === 'ratewindow-redis')
    return { limit, window: '1m', store: new RedisStore({ client: redis() }), blockedCache: false }
  if (variant === 'ratewindow-redis-fixed')
    return { limit, window: '1m', algorithm: 'fixed-window', store: new RedisStore({ client: redis() }) }
  if (variant === 'ratewindow-redis-cached')
    return { limit, window: '1m', store: new RedisStore({ client: redis() }), blockedCache: true }
  return undefined
}

async function start(): Promise<number> {
  const options = ours()
  const peer =
    options || variant === 'bare' ? undefined : await peerMiddleware(framework, variant, limit, redis)
  if (framework === 'express') {
    const app = express()
    app.set('trust proxy', true)
    if (options) app.use(expressRateLimit(options))
    if (peer) app.use(peer as express.RequestHandler)
    app.get('/', (_request, response) => {
      response.send('ok')
    })
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    return (server.address() as AddressInfo).port
  }
  if (framework === 'koa') {
    const app = new Koa()
    app.proxy = true
    if (options) app.use(koaRateLimit(options))
    if (peer) app.use(peer as Koa.Middleware)
    app.use((ctx) => {
      ctx.body = 'ok'
    })
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    return (server.address() as AddressInfo).port
  }
  const app = Fastify({ trustProxy: true })
  if (options) await app.register(fastifyRateLimit, options)
  if (peer) await (peer as (app: unknown) => Promise<void>)(app)
  app.get('/', async () => 'ok')
  await app.listen({ port: 0, host: '127.0.0.1' })
  return (app.server.address() as AddressInfo).port
}

console.log(JSON.stringify({ port: await start() }))
// Exit normally on a signal, so that --cpu-prof can write its profile.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(0))
