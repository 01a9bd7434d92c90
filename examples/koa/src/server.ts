import { createApp } from './app.js'
import { redisStore } from './redis.js'

const port = Number(process.env.PORT ?? 3000)
createApp({ store: (await redisStore(process.env.REDIS_URL))?.store }).listen(port, '127.0.0.1', () => {
  console.log(`Koa example on http://127.0.0.1:${port} (${process.env.REDIS_URL ? 'Redis' : 'memory'} store)`)
})
