/**
 * The Elysia app of test/runtimes/elysia.test.ts: built once (esbuild, ratewindow from source, Elysia and ioredis
 * left to the workspace's node_modules) and served as Elysia users serve it: on Bun's own server, or on Node with
 * `@elysiajs/node`. One route group per case, each with a limiter of its own prefix. Env: `PORT`, `STORE`
 * (`memory` or `redis`, on `REDIS_PORT`), `PREFIX` (the run's, for Redis keys). Prints `listening` once it serves.
 */
import {
  type ElysiaRateLimitOptions,
  MemoryStore,
  RedisStore,
  rateLimit,
  type Store,
  slowDown,
} from '@ratewindow/elysia'
import { Elysia, t } from 'elysia'
import { Redis } from 'ioredis'

declare const Bun: unknown
const onBun = typeof Bun !== 'undefined'
const { env } = process

let client: Redis | undefined
const storeOf = (): Store => {
  if (env.STORE !== 'redis') return new MemoryStore()
  client ??= new Redis({ host: '127.0.0.1', port: Number(env.REDIS_PORT), maxRetriesPerRequest: 1 })
  return new RedisStore({ client, prefix: env.PREFIX })
}
const store = storeOf()
/** A store whose every call fails, as a Redis that went away does. */
const down = () => Promise.reject(new Error('connection refused'))
const deadStore = { consume: down, peek: down, refund: down, reset: down } as unknown as Store

const limiter = (prefix: string, options: ElysiaRateLimitOptions) =>
  rateLimit({ store, prefix: `${prefix}:`, onError: () => {}, ...options })

const basic = limiter('basic', { limit: 3, window: '1m' })
const adapter = onBun ? undefined : (await import('@elysiajs/node')).node()

const app = new Elysia(adapter === undefined ? {} : { adapter })
  .get('/free', () => 'free')
  .group('/basic', (group) =>
    group.use(basic).get('', ({ rateLimit }) => ({ remaining: rateLimit?.remaining, key: rateLimit?.key })),
  )
  .post('/reset', async () => {
    await basic.resetKey('127.0.0.1')
    return 'reset'
  })
  .group('/untrusted', (group) =>
    group.use(limiter('untrusted', { limit: 2, window: '1m' })).get('', ({ rateLimit }) => rateLimit?.key),
  )
  .group('/proxied', (group) =>
    group
      .use(limiter('proxied', { limit: 2, window: '1m', trustProxy: 1 }))
      .get('', ({ rateLimit }) => rateLimit?.key),
  )
  .group('/flood', (group) =>
    group.use(limiter('flood', { limit: 20, window: '1h', trustProxy: 1 })).get('', () => 'ok'),
  )
  .group('/open', (group) =>
    group.use(limiter('open', { limit: 1, store: deadStore, timeout: 200 })).get('', () => 'open'),
  )
  .group('/closed', (group) =>
    group
      .use(limiter('closed', { limit: 1, store: deadStore, timeout: 200, onStoreError: 'deny' }))
      .get('', () => 'closed'),
  )
  .group('/outcome', (group) =>
    group
      .use(limiter('outcome', { limit: 2, window: '1m', skipFailedRequests: true }))
      .get('/fails', ({ set }) => {
        set.status = 500
        return 'failed'
      })
      .get('/throws', () => {
        throw new Error('the handler failed')
      })
      .get('/ok', ({ rateLimit }) => ({ remaining: rateLimit?.remaining })),
  )
  .group('/slot', (group) =>
    group
      .use(limiter('slot', { limit: 100, window: '1m', concurrency: { limit: 1, lease: '1h' } }))
      .get('/ok', () => 'ok')
      .get('/throws', () => {
        throw new Error('the handler failed')
      })
      .post('/validated', ({ body }) => body, { body: t.Object({ n: t.Number() }) }),
  )
  .group('/slow', (group) =>
    group
      .use(slowDown({ store, prefix: 'slow:', delayAfter: 1, delayMs: 20, windowMs: 3_600_000 })) // an hour: no window ends within a test
      .get('', ({ slowDown }) => ({ used: slowDown?.used, delay: slowDown?.delay })),
  )

app.listen({ port: Number(env.PORT), hostname: '127.0.0.1' }, () => console.log('listening'))
