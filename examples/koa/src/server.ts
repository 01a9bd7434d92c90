import { createApp } from './app.js'

const port = Number(process.env.PORT ?? 3000)
createApp({ redisUrl: process.env.REDIS_URL }).listen(port, '127.0.0.1', () => {
  console.log(`Koa example on http://127.0.0.1:${port} (${process.env.REDIS_URL ? 'Redis' : 'memory'} store)`)
})
