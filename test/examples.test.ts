/** The examples start and answer as their READMEs say: 5 per 10 s per client, 3 per minute on POST /login. */
import { once } from 'node:events'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import type { RedisStore } from '@ratewindow/core'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { createApp as expressApp } from '../examples/express/src/app.js'
import { redisStore as expressRedis } from '../examples/express/src/redis.js'
import { createApp as fastifyApp } from '../examples/fastify/src/app.js'
import { redisStore as fastifyRedis } from '../examples/fastify/src/redis.js'
import { createApp as honoApp } from '../examples/hono/src/app.js'
import { redisStore as honoRedis } from '../examples/hono/src/redis.js'
import { createApp as koaApp } from '../examples/koa/src/app.js'
import { redisStore as koaRedis } from '../examples/koa/src/redis.js'
import { memoryExporter, run as otelExample } from '../examples/otel/src/console.js'
import { redisEnvironment } from './support/redis.js'

const EXAMPLES: [
  string,
  (url: string, kind: string) => Promise<{ store: RedisStore; quit(): Promise<unknown> } | undefined>,
  (options: { store?: RedisStore }) => Promise<{ server: Server; close(): Promise<void> }>,
][] = [
  [
    'express',
    expressRedis,
    async (options) => {
      const server = expressApp(options).listen(0, '127.0.0.1')
      await once(server, 'listening')
      return { server, close: () => new Promise((resolve) => server.close(() => resolve())) }
    },
  ],
  [
    'koa',
    koaRedis,
    async (options) => {
      const server = koaApp(options).listen(0, '127.0.0.1')
      await once(server, 'listening')
      return { server, close: () => new Promise((resolve) => server.close(() => resolve())) }
    },
  ],
  [
    'fastify',
    fastifyRedis,
    async (options) => {
      const app = await fastifyApp(options)
      await app.listen({ port: 0, host: '127.0.0.1' })
      return { server: app.server, close: () => app.close() }
    },
  ],
  [
    // On Node (@hono/node-server); test/runtimes/bun-deno-example.test.ts starts its Bun and Deno entries.
    'hono',
    honoRedis,
    async (options) => {
      const server = serve({
        fetch: honoApp({ getConnInfo, ...options }).fetch,
        port: 0,
        hostname: '127.0.0.1',
      }) as Server
      await once(server, 'listening')
      return { server, close: () => new Promise((resolve) => server.close(() => resolve())) }
    },
  ],
]

let runs = 0

describe.each(EXAMPLES)('examples/%s', (_, redisStore, start) => {
  it.each([
    ['the memory store', undefined],
    ['Redis through ioredis (REDIS_URL)', 'ioredis'],
    ['Redis through node-redis (REDIS_URL, REDIS_CLIENT=node-redis)', 'node-redis'],
  ])('starts and limits as its README says, on %s', async (_, kind) => {
    const redis =
      kind === undefined
        ? undefined
        : await redisStore(`redis://127.0.0.1:${redisEnvironment().standalonePort}`, kind)
    if (kind !== undefined) expect(redis).toBeDefined()
    const app = await start({ store: redis?.store })
    // Clients of their own per run: the Redis server is shared by the runs.
    const client = (n: number) => `198.18.${runs}.${n}`
    runs++
    try {
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
      // Through the trusted loopback proxy: the X-Forwarded-For entry is the client.
      const codes: number[] = []
      for (let i = 0; i < 6; i++)
        codes.push((await request(url).get('/').set('X-Forwarded-For', client(1))).status)
      expect(codes).toEqual([200, 200, 200, 200, 200, 429])
      const login: number[] = []
      for (let i = 0; i < 4; i++) {
        login.push((await request(url).post('/login').set('X-Forwarded-For', client(2))).status)
      }
      expect(login).toEqual([200, 200, 200, 429])
      // A client cannot choose another bucket by prepending an address of its own.
      const spoofed = await request(url)
        .get('/')
        .set('X-Forwarded-For', `198.51.100.9, ${client(1)}`)
      expect(spoofed.status).toBe(429)
    } finally {
      await app.close()
      await redis?.quit()
    }
  })
})

describe('examples/otel', () => {
  it('limits as its README says and exports the decisions it lists', async () => {
    const exporter = memoryExporter()
    expect(await otelExample(exporter)).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 429, 429])
    const decisions = exporter
      .getMetrics()
      .flatMap((batch) => batch.scopeMetrics.flatMap((scope) => scope.metrics))
      .find((metric) => metric.descriptor.name === 'ratewindow.decisions')!
    expect(
      decisions.dataPoints.map((point) => [
        point.attributes['ratewindow.outcome'],
        point.attributes['ratewindow.rule'],
        point.attributes['http.route'],
        point.value,
      ]),
    ).toEqual([
      ['allowed', 'per-minute', '/search', 3],
      ['shadow-limited', 'burst', '/search', 5],
      ['limited', 'per-minute', '/search', 2],
    ])
  })
})
