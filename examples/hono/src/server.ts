// Node: `pnpm --filter @ratewindow/example-hono start` (tsx), on @hono/node-server.
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { createApp } from './app.js'
import { redisStore } from './redis.js'

const port = Number(process.env.PORT ?? 3000)
const app = createApp({ getConnInfo, store: (await redisStore(process.env.REDIS_URL))?.store })
serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, () => {
  console.log(
    `Hono example on http://127.0.0.1:${port} (${process.env.REDIS_URL ? 'Redis' : 'memory'} store)`,
  )
})
