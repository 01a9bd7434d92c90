/**
 * A node:http server whose clients share one limit through Redis: start two copies on two ports and they
 * count together. REDIS_CLIENT picks the client (ioredis, node-redis or valkey-glide), REDIS_URL a standalone
 * server (default redis://127.0.0.1:6379), REDIS_CLUSTER comma-separated host:port seeds of a Cluster instead.
 */
import { createServer } from 'node:http'
import {
  ipKey,
  RateLimiter,
  RedisStore,
  rateLimitHeaders,
  slidingWindowCounter,
  tokenBucket,
} from '@ratewindow/core'
import { connectRedis } from './client.js'

const client = await connectRedis()
const limiter = new RateLimiter({
  rules: [
    tokenBucket({ capacity: 5, refillRate: 1, interval: '1s' }),
    slidingWindowCounter({ limit: 100, window: '1h' }),
  ],
  store: new RedisStore({ client }),
  prefix: 'example',
})

const server = createServer(async (request, response) => {
  try {
    const result = await limiter.limit(ipKey(request.socket.remoteAddress ?? ''))
    for (const [name, value] of Object.entries(rateLimitHeaders(result))) response.setHeader(name, value)
    response.statusCode = result.allowed ? 200 : 429
    response.end(result.allowed ? 'hello\n' : 'Too Many Requests\n')
  } catch (error) {
    // Redis down or slow: this example fails open; the adapters make that a policy (`onStoreError`).
    console.error('rate limiter unavailable:', (error as Error).message)
    response.end('hello (unlimited: rate limiter unavailable)\n')
  }
})

const port = Number(process.env.PORT ?? 3000)
server.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`))
