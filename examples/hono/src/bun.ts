// Bun: `bun src/bun.ts`. A module whose default export has `fetch` is served by Bun itself (Bun.serve).
import { getConnInfo } from 'hono/bun'
import { createApp } from './app.js'
import { redisStore } from './redis.js'

const app = createApp({ getConnInfo, store: (await redisStore(process.env.REDIS_URL))?.store })

export default { port: Number(process.env.PORT ?? 3000), hostname: '127.0.0.1', fetch: app.fetch }
