import { type RedisStore, rateLimit, slidingWindowLog } from '@ratewindow/fastify'
import Fastify, { type FastifyInstance } from 'fastify'

/**
 * The same API as the Express example: 5 requests per 10 s per client, and 3 per minute (exact) on POST
 * /login, configured per route. Memory store by default; a `RedisStore` when given (src/redis.ts makes one from REDIS_URL).
 */
export async function createApp(options: { store?: RedisStore } = {}): Promise<FastifyInstance> {
  const { store } = options
  // Behind a local reverse proxy: trust its address (a hop count works on Fastify 4 only; see the README).
  const app = Fastify({ trustProxy: '127.0.0.1' })
  await app.register(rateLimit, { limit: 5, window: '10s', store })
  app.get('/', async (request) => ({ hello: 'world', remaining: request.rateLimit?.remaining }))
  app.post(
    '/login',
    // The route's rules replace the plugin's limit and window; the route counts on its own.
    { config: { ratewindow: { rules: slidingWindowLog({ limit: 3, window: '1m' }) } } },
    async () => ({ ok: true }),
  )
  app.get('/health', { config: { ratewindow: false } }, async () => 'up')
  return app
}
