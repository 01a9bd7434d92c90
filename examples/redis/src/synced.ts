/**
 * The same server in synchronised local mode: each process decides in memory from its view of the shared
 * counts and syncs with Redis every 100 ms per key in use. Start several copies: together they admit at most
 * limit + (copies − 1) × maxPending per window (docs/algorithms.md).
 */
import { createServer } from 'node:http'
import { ipKey, RateLimiter, rateLimitHeaders, SyncedStore, slidingWindowCounter } from '@ratewindow/core'
import { Redis } from 'ioredis'

const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
})
const store = new SyncedStore({ client, interval: '100ms', maxPending: 2 })
const limiter = new RateLimiter({
  rules: slidingWindowCounter({ limit: 10, window: '1m' }),
  store,
  prefix: 'example-synced',
})

const server = createServer(async (request, response) => {
  // limit() never rejects for a store failure: while Redis is away the failure policy answers.
  const result = await limiter.limit(ipKey(request.socket.remoteAddress ?? ''))
  for (const [name, value] of Object.entries(rateLimitHeaders(result))) response.setHeader(name, value)
  response.statusCode = result.allowed ? 200 : 429
  response.end(result.allowed ? 'hello\n' : 'Too Many Requests\n')
})

const port = Number(process.env.PORT ?? 3000)
server.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`))
// On shutdown, send what is pending before leaving.
process.once('SIGTERM', () => server.close(() => void store.close().then(() => client.quit())))
