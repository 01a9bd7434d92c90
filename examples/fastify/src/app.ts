import { RedisStore, rateLimit, slidingWindowLog } from '@ratewindow/fastify'
import Fastify, { type FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'

/**
 * The same API as the Express example: 5 requests per 10 s per client, and 3 per minute (exact) on POST
 * /login, configured per route. Memory store by default; Redis when `redisUrl` is given.
 */
export async function createApp(options: { redisUrl?: string } = {}): Promise<FastifyInstance> {
  const store = options.redisUrl
    ? new RedisStore({
        client: new Redis(options.redisUrl, {
          maxRetriesPerRequest: 1,
          enableOfflineQueue: false,
          autoResendUnfulfilledCommands: false,
        }),
      })
    : undefined
  const app = Fastify({ trustProxy: '127.0.0.1' }) // behind a local reverse proxy; see the README
  await app.register(rateLimit, { limit: 5, window: '10s', store })
  app.get('/', async (request) => ({ hello: 'world', remaining: request.rateLimit?.remaining }))
  app.post(
    '/login',
    { config: { rateLimit: { rules: slidingWindowLog({ limit: 3, window: '1m' }), prefix: 'login' } } },
    async () => ({ ok: true }),
  )
  app.get('/health', { config: { rateLimit: false } }, async () => 'up')
  return app
}
