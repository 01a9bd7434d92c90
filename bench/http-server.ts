/**
 * One benchmark server in its own process, so the load generator does not share its event loop.
 * argv: <framework: express|koa|fastify|hono> <variant> <path: allowed|denied>. Prints `{"port":N}` once listening on 127.0.0.1.
 * Variants: bare, ratewindow (memory store), ratewindow-redis (REDIS_URL), ratewindow-synced (SyncedStore on
 * REDIS_URL), the floors, and the peers in peers.ts.
 *
 * The floors (issue 12): `floor-headers` is the bare framework plus one hook that sets two headers the size of
 * our draft-7 pair and makes no decision; `floor-key` also reads the client address the framework's way (its
 * trust-proxy rules on X-Forwarded-For) and formats the `RateLimit` value per request (Node then checks a new
 * string each time), the part of any limiter's work that is not its decision; `floor-redis` adds to the header
 * floor one ioredis EVALSHA of a script that only INCRs a key per client with a TTL. No limiter that sets headers
 * (or that calls Redis once per request) can beat them. `floor-redis-grouped` (issue 33) is that floor grouped:
 * the requests of one event-loop turn share one EVALSHA that INCRs each one's key and answers each one's count,
 * sent at the end of the turn (no decision, no bound, no timeout): the distance to what grouping can reach.
 *
 * Our other memory rows (issue 33): `ratewindow-no-headers` (`headers: false`, the work of a peer that sends no
 * headers on allowed responses, as the bench's rate-limiter-flexible middleware) and `ratewindow-default-headers`
 * (our default headers, draft-6: four). `ratewindow-general`: `ratewindow` on the engine's general pipeline.
 *
 * The parent asks for this process's CPU time over IPC (`process.cpuUsage()`), to report Node CPU per request.
 */
import { once } from 'node:events'
import type { Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { type HttpRateLimitOptions, MemoryStore, RedisStore, SyncedStore } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import { rateLimit as honoRateLimit } from '@ratewindow/hono'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import express from 'express'
import Fastify from 'fastify'
import { Hono, type MiddlewareHandler } from 'hono'
import { Redis } from 'ioredis'
import Koa from 'koa'
import { peerMiddleware } from './peers.js'

const [framework = 'express', variant = 'bare', path = 'allowed'] = process.argv.slice(2)
const limit = path === 'allowed' ? 100_000_000 : 1
const redis = () =>
  new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { enableAutoPipelining: false })
// Our rows send draft-7 headers (two, like the floors; the default is draft-6, four headers), as in issue 12.
// Our draft-7 pair for this limit, same names and sizes (the header floor sets these without deciding).
const POLICY = `${limit};w=60`
const STATE = `limit=${limit}, remaining=${limit - 1}, reset=60`
const INCR_TTL = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`
/** The grouped floor's script: the INCR-with-TTL of each key, its counts in order. */
const INCR_TTL_EACH = `local counts = {}
for i = 1, #KEYS do
  counts[i] = redis.call('INCR', KEYS[i])
  if counts[i] == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
end
return counts`
/**
 * `floor-key` reads the client address here (kept from being optimised away) and formats the state header per
 * request, with a `remaining` that counts down: what any IP-keyed limiter must do besides deciding.
 */
export let sink: string | undefined
let left = limit
const state = variant === 'floor-key' ? () => `limit=${limit}, remaining=${--left}, reset=60` : () => STATE
type FloorClient = Redis & {
  floor(key: string, ttl: number): Promise<number>
  floorEach(keys: number, ...keysThenTtl: (string | number)[]): Promise<number[]>
}
/** The floors' one Redis call per request: per request (`floor-redis`) or shared by a turn (`-grouped`). */
const floorCall = (): ((key: string) => Promise<unknown>) | undefined => {
  if (variant !== 'floor-redis' && variant !== 'floor-redis-grouped') return undefined
  const client = redis() as FloorClient
  // EVALSHA, EVAL once on NOSCRIPT; `floorEach` takes the number of keys first.
  client.defineCommand('floor', { numberOfKeys: 1, lua: INCR_TTL })
  client.defineCommand('floorEach', { lua: INCR_TTL_EACH })
  if (variant === 'floor-redis') return (key) => client.floor(key, 60_000)
  // The requests of this turn: their keys, and how to answer each.
  let keys: string[] = []
  let waiters: { resolve(count: number): void; reject(error: unknown): void }[] = []
  const send = () => {
    const answering = waiters
    client.floorEach(keys.length, ...keys, 60_000).then(
      (counts) => {
        for (const [i, waiter] of answering.entries()) waiter.resolve(counts[i]!)
      },
      (error) => {
        for (const waiter of answering) waiter.reject(error)
      },
    )
    keys = []
    waiters = []
  }
  return (key) =>
    new Promise((resolve, reject) => {
      if (keys.length === 0) setImmediate(send)
      keys.push(key)
      waiters.push({ resolve, reject })
    })
}
const ours = (): HttpRateLimitOptions<unknown> | undefined => {
  if (variant === 'ratewindow-no-headers' || variant === 'ratewindow-default-headers')
    return {
      limit,
      window: '1m',
      ...(variant === 'ratewindow-no-headers' ? { headers: false } : {}),
      store: new MemoryStore({ maxKeys: 1_000_000 }),
      blockedCache: false,
    }
  // `ratewindow-overrides`: overrides and blocks read by every decision (issue 34); against `ratewindow`, their cost.
  // `ratewindow-general` (issue 46): `ratewindow` on the general pipeline, which a `skip` that never skips makes the
  // engine take (http/compiled.ts); against `ratewindow`, what the compiled path saves.
  if (variant === 'ratewindow' || variant === 'ratewindow-overrides' || variant === 'ratewindow-general')
    return {
      limit,
      window: '1m',
      headers: 'draft-7',
      store: new MemoryStore({ maxKeys: 1_000_000 }),
      blockedCache: false,
      overrides: variant === 'ratewindow-overrides',
      ...(variant === 'ratewindow-general' ? { skip: () => false } : {}),
    }
  // `ratewindow-redis-overrides`: each decision script reads the key's record (issue 34); against `ratewindow-redis`.
  if (variant === 'ratewindow-redis' || variant === 'ratewindow-redis-overrides')
    return {
      limit,
      window: '1m',
      headers: 'draft-7',
      store: new RedisStore({ client: redis() }),
      blockedCache: false,
      overrides: variant === 'ratewindow-redis-overrides',
    }
  // `ratewindow-synced-overrides`: each decision reads the key's record as the last sync left it, each sync reads
  // the records (issue 34); against `ratewindow-synced`, their cost.
  if (variant === 'ratewindow-synced' || variant === 'ratewindow-synced-overrides')
    return {
      limit,
      window: '1m',
      headers: 'draft-7',
      store: new SyncedStore({ client: redis() }),
      blockedCache: false,
      overrides: variant === 'ratewindow-synced-overrides',
    }
  if (variant === 'ratewindow-redis-fixed')
    return {
      limit,
      window: '1m',
      headers: 'draft-7',
      algorithm: 'fixed-window',
      store: new RedisStore({ client: redis() }),
    }
  if (variant === 'ratewindow-redis-cached')
    return {
      limit,
      window: '1m',
      headers: 'draft-7',
      store: new RedisStore({ client: redis() }),
      blockedCache: true,
    }
  return undefined
}

async function start(): Promise<number> {
  const options = ours()
  const floor = variant.startsWith('floor-')
  const client = floorCall()
  const peer =
    options || floor || variant === 'bare'
      ? undefined
      : await peerMiddleware(framework, variant, limit, redis)
  if (framework === 'express') {
    const app = express()
    app.set('trust proxy', true)
    if (options) app.use(expressRateLimit(options))
    if (floor && !client)
      app.use((request, response, next) => {
        if (variant === 'floor-key') sink = request.ip
        response.setHeader('RateLimit-Policy', POLICY)
        response.setHeader('RateLimit', state())
        next()
      })
    if (client)
      app.use((request, response, next) => {
        client(`floor:${request.ip}`).then(() => {
          response.setHeader('RateLimit-Policy', POLICY)
          response.setHeader('RateLimit', state())
          next()
        }, next)
      })
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
    if (floor)
      app.use(async (ctx, next) => {
        if (client) await client(`floor:${ctx.ip}`)
        else if (variant === 'floor-key') sink = ctx.ip
        ctx.set('RateLimit-Policy', POLICY)
        ctx.set('RateLimit', state())
        await next()
      })
    if (peer) app.use(peer as Koa.Middleware)
    app.use((ctx) => {
      ctx.body = 'ok'
    })
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    return (server.address() as AddressInfo).port
  }
  if (framework === 'hono') {
    // @hono/node-server. Hono has no trust-proxy setting of its own: the client is the X-Forwarded-For entry the
    // load generator's loopback "proxy" added (ratewindow: `trustProxy: '127.0.0.1'`; floor-key reads the same).
    const app = new Hono()
    if (options) app.use(honoRateLimit({ ...options, getConnInfo, trustProxy: '127.0.0.1' }))
    if (floor)
      app.use(async (c, next) => {
        if (client) await client(`floor:${c.req.header('x-forwarded-for')}`)
        else if (variant === 'floor-key')
          sink = getConnInfo(c).remote.address === '127.0.0.1' ? c.req.header('x-forwarded-for') : undefined
        c.header('RateLimit-Policy', POLICY)
        c.header('RateLimit', state())
        await next()
      })
    if (peer) app.use(peer as MiddlewareHandler)
    app.get('/', (c) => c.text('ok'))
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as HttpServer
    if (!server.listening) await once(server, 'listening')
    return (server.address() as AddressInfo).port
  }
  const app = Fastify({ trustProxy: true })
  if (options) await app.register(fastifyRateLimit, options)
  if (peer) await (peer as (app: unknown) => Promise<void>)(app)
  if (floor && !client)
    app.addHook('onRequest', (request, reply, done) => {
      if (variant === 'floor-key') sink = request.ip
      reply.header('RateLimit-Policy', POLICY)
      reply.header('RateLimit', state())
      done()
    })
  if (client)
    app.addHook('onRequest', async (request, reply) => {
      await client(`floor:${request.ip}`)
      reply.header('RateLimit-Policy', POLICY)
      reply.header('RateLimit', state())
    })
  app.get('/', async () => 'ok')
  await app.listen({ port: 0, host: '127.0.0.1' })
  return (app.server.address() as AddressInfo).port
}

console.log(JSON.stringify({ port: await start() }))
process.on('message', () => {
  const { user, system } = process.cpuUsage()
  process.send?.({ cpu: user + system })
})
// Exit normally on a signal, so that --cpu-prof can write its profile.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(0))
