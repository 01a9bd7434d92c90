import { createApp } from './app.js'
import { redisStore } from './redis.js'

const port = Number(process.env.PORT ?? 3000)
const app = await createApp({ store: (await redisStore(process.env.REDIS_URL))?.store })
await app.listen({ port, host: '127.0.0.1' })
console.log(
  `Fastify example on http://127.0.0.1:${port} (${process.env.REDIS_URL ? 'Redis' : 'memory'} store)`,
)
