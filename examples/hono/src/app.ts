import {
  type GetConnInfo,
  type RateLimitEnv,
  type RedisStore,
  rateLimit,
  slidingWindowLog,
} from '@ratewindow/hono'
import { Hono } from 'hono'

/**
 * An API with a global limit (5 requests per 10 s per client) and a stricter, exact limit on /login (3 per
 * minute), the same on every runtime: each entry (src/server.ts for Node, src/bun.ts, src/deno.ts) passes its
 * runtime's `getConnInfo`. Memory store by default; a `RedisStore` when given (src/redis.ts makes one from
 * REDIS_URL; all processes share limits).
 */
export function createApp(options: { getConnInfo: GetConnInfo; store?: RedisStore }): Hono<RateLimitEnv> {
  const { getConnInfo, store } = options
  // Behind a local reverse proxy: X-Forwarded-For is read from it only (see the README).
  const address = { getConnInfo, trustProxy: ['127.0.0.1', '::1'] }
  const app = new Hono<RateLimitEnv>()
  app.use(rateLimit({ limit: 5, window: '10s', store, ...address }))
  app.get('/', (c) => c.json({ hello: 'world', remaining: c.get('rateLimit')?.remaining }))
  app.post(
    '/login',
    rateLimit({ rules: slidingWindowLog({ limit: 3, window: '1m' }), store, ...address }),
    (c) => c.json({ ok: true }),
  )
  return app
}
