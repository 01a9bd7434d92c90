import { createApp } from './app.js'

const port = Number(process.env.PORT ?? 3000)
const app = await createApp({ redisUrl: process.env.REDIS_URL })
await app.listen({ port, host: '127.0.0.1' })
console.log(
  `Fastify example on http://127.0.0.1:${port} (${process.env.REDIS_URL ? 'Redis' : 'memory'} store)`,
)
