import { NestFactory } from '@nestjs/core'
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { RedisStore } from '@ratewindow/nestjs'
import { Redis } from 'ioredis'
import { appModule } from './app.module.js'

const port = Number(process.env.PORT ?? 3000)
const fastify = process.env.PLATFORM === 'fastify'
const redis = process.env.REDIS_URL
  ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 })
  : undefined
const store = redis && new RedisStore({ client: redis })

// Behind one reverse proxy on this machine: X-Forwarded-For from it names the client.
const adapter = fastify ? new FastifyAdapter({ trustProxy: '127.0.0.1' }) : new ExpressAdapter()
const app = await NestFactory.create<NestExpressApplication>(appModule(store), adapter, { logger: ['error'] })
if (!fastify) app.set('trust proxy', 'loopback')
app.enableShutdownHooks() // closes the limiters' stores on SIGTERM; the Redis client is ours to quit
await app.listen(port, '127.0.0.1')
console.log(
  `NestJS example (${fastify ? 'Fastify' : 'Express'}) on http://127.0.0.1:${port} (${redis ? 'Redis' : 'memory'} store)`,
)
