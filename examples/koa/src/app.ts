import { type RedisStore, rateLimit, slidingWindowLog } from '@ratewindow/koa'
import Koa from 'koa'

/**
 * The same API as the Express example: 5 requests per 10 s per client, and 3 per minute (exact) on POST
 * /login. Memory store by default; a `RedisStore` when given (src/redis.ts makes one from REDIS_URL).
 */
export function createApp(options: { store?: RedisStore } = {}): Koa {
  const { store } = options
  const app = new Koa()
  // Behind one reverse proxy you control: trust X-Forwarded-For, but only the entry that proxy added.
  app.proxy = true
  app.maxIpsCount = 1
  app.use(rateLimit({ limit: 5, window: '10s', store }))
  const login = rateLimit({ rules: slidingWindowLog({ limit: 3, window: '1m' }), store })
  app.use(async (ctx, next) => (ctx.method === 'POST' && ctx.path === '/login' ? login(ctx, next) : next()))
  app.use((ctx) => {
    ctx.body =
      ctx.path === '/login' ? { ok: true } : { hello: 'world', remaining: ctx.state.rateLimit?.remaining }
  })
  return app
}
