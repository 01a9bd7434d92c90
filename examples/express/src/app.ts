import { type RedisStore, rateLimit, slidingWindowLog } from '@ratewindow/express'
import express, { type Express } from 'express'

/**
 * An API with a global limit (5 requests per 10 s per client) and a stricter, exact limit on /login
 * (3 per minute). Memory store by default; a `RedisStore` when given (src/redis.ts makes one from REDIS_URL; all processes share limits).
 */
export function createApp(options: { store?: RedisStore } = {}): Express {
  const { store } = options
  const app = express()
  app.set('trust proxy', 'loopback') // behind a local reverse proxy; see the README
  app.use(rateLimit({ limit: 5, window: '10s', store }))
  app.get('/', (request, response) => {
    response.json({ hello: 'world', remaining: request.rateLimit?.remaining })
  })
  app.post(
    '/login',
    rateLimit({ rules: slidingWindowLog({ limit: 3, window: '1m' }), store }),
    (_request, response) => {
      response.json({ ok: true })
    },
  )
  return app
}
