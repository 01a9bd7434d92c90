/**
 * Peer libraries configured like ours (same limit, 1 minute window, client IP key, memory or Redis), each in
 * the idiomatic form its documentation shows. Only the bench package depends on them.
 */
import fastifyRateLimit from '@fastify/rate-limit'
import { rateLimit as expressRateLimit } from 'express-rate-limit'
import type { FastifyInstance } from 'fastify'
import { rateLimiter as honoRateLimiter } from 'hono-rate-limiter'
import type { Redis } from 'ioredis'
import koaRateLimit from 'koa-ratelimit'
import { RedisStore as ExpressRedisStore, type RedisReply } from 'rate-limit-redis'
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible'

export const PEERS: Record<string, string[]> = {
  express: ['express-rate-limit', 'rate-limiter-flexible', 'rate-limiter-flexible-req'],
  koa: ['koa-ratelimit', 'rate-limiter-flexible'],
  fastify: ['@fastify/rate-limit', 'rate-limiter-flexible'],
  hono: ['hono-rate-limiter'],
}

/** Peers that have no Redis variant here. */
export const MEMORY_ONLY = new Set(['hono-rate-limiter', 'rate-limiter-flexible-req'])

type Middleware = unknown

export async function peerMiddleware(
  framework: string,
  variant: string,
  limit: number,
  redis: () => Redis,
): Promise<Middleware> {
  const useRedis = variant.endsWith('-redis')
  const name = useRedis ? variant.slice(0, -'-redis'.length) : variant
  if (name === 'rate-limiter-flexible' || name === 'rate-limiter-flexible-req') {
    const limiter: RateLimiterAbstract = useRedis
      ? new RateLimiterRedis({ storeClient: redis(), points: limit, duration: 60 })
      : new RateLimiterMemory({ points: limit, duration: 60 })
    return flexible(framework, limiter, name === 'rate-limiter-flexible-req')
  }
  if (framework === 'express' && name === 'express-rate-limit') {
    const client = useRedis ? redis() : undefined
    return expressRateLimit({
      windowMs: 60_000,
      limit,
      standardHeaders: 'draft-6',
      legacyHeaders: false,
      validate: false,
      store: client
        ? new ExpressRedisStore({
            sendCommand: (command: string, ...args: string[]) =>
              client.call(command, ...args) as Promise<RedisReply>,
          })
        : undefined,
    })
  }
  if (framework === 'koa' && name === 'koa-ratelimit') {
    return koaRateLimit({
      driver: useRedis ? 'redis' : 'memory',
      db: (useRedis ? redis() : new Map()) as never,
      duration: 60_000,
      max: limit,
      id: (ctx) => ctx.ip,
    })
  }
  if (framework === 'fastify' && name === '@fastify/rate-limit') {
    return async (app: FastifyInstance) => {
      await app.register(fastifyRateLimit, {
        max: limit,
        timeWindow: 60_000,
        redis: useRedis ? redis() : undefined,
      })
    }
  }
  if (framework === 'hono' && variant === 'hono-rate-limiter') {
    // Its README's form, with the cheapest key there is (the header itself, not walked) and the same two
    // draft-7 headers as ours and the floors.
    return honoRateLimiter({
      windowMs: 60_000,
      limit,
      standardHeaders: 'draft-7',
      keyGenerator: (c) => c.req.header('x-forwarded-for') ?? '',
    })
  }
  throw new Error(`unknown peer ${variant} for ${framework}`)
}

/** rate-limiter-flexible has no middleware: the few lines its README shows, per framework. */
function flexible(framework: string, limiter: RateLimiterAbstract, setsResult = false): Middleware {
  const retryAfter = (error: unknown) =>
    String(error instanceof RateLimiterRes ? Math.ceil(error.msBeforeNext / 1000) : 1)
  if (framework === 'express') {
    const points = limiter.points
    return (
      request: { ip: string; rateLimit?: unknown },
      response: { set: (k: string, v: string) => void; status: (n: number) => { send: (b: string) => void } },
      next: () => void,
    ) => {
      limiter.consume(request.ip).then(
        (result) => {
          // `rate-limiter-flexible-req` (issue 46): the decision on `req.rateLimit`, as express-rate-limit and
          // ratewindow give it to the app: the second Express reference.
          if (setsResult)
            request.rateLimit = {
              limit: points,
              used: result.consumedPoints,
              remaining: result.remainingPoints,
              resetTime: new Date(Date.now() + result.msBeforeNext),
            }
          next()
        },
        (error) => {
          response.set('Retry-After', retryAfter(error))
          response.status(429).send('Too Many Requests')
        },
      )
    }
  }
  if (framework === 'koa') {
    return async (
      ctx: { ip: string; status: number; body: unknown; set: (k: string, v: string) => void },
      next: () => Promise<void>,
    ) => {
      try {
        await limiter.consume(ctx.ip)
      } catch (error) {
        ctx.set('Retry-After', retryAfter(error))
        ctx.status = 429
        ctx.body = 'Too Many Requests'
        return
      }
      await next()
    }
  }
  return async (app: FastifyInstance) => {
    app.addHook('onRequest', async (request, reply) => {
      try {
        await limiter.consume(request.ip)
      } catch (error) {
        return reply.code(429).header('Retry-After', retryAfter(error)).send('Too Many Requests')
      }
    })
  }
}
