// Deno: `deno serve --port 3000 src/deno.ts` (flags in package.json). `deno serve` serves the default export.
import { getConnInfo } from 'hono/deno'
import { createApp } from './app.js'
import { redisStore } from './redis.js'

const app = createApp({ getConnInfo, store: (await redisStore(process.env.REDIS_URL))?.store })

export default { fetch: app.fetch }
