/**
 * `ratewindow` run as a user runs it (`node dist/bin.js`), against real Redis: a running Express app (standalone)
 * and a Fastify app (Cluster) honour at their next decision what the CLI did; `top` finds the most limited keys
 * of 10,000; the `--json` shapes and the exit codes are pinned.
 */
import { createServer, type Server } from 'node:http'
import { adminHandler, adminStats } from '@ratewindow/admin'
import { expressAdmin } from '@ratewindow/admin/express'
import { fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { storedHash } from '@ratewindow/core/stored'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import express from 'express'
import Fastify from 'fastify'
import type { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clusterClient, redisEnvironment, standaloneClient } from '../../../test/support/redis.js'
import { freePort } from '../../../test/support/redis-server.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { limiters } from './fixtures/limiters.mjs'
import { CONFIG, ensureBuilt, packedProject, type Ran, ratewindow } from './support.js'

beforeAll(ensureBuilt, 120_000)

const servers: (() => Promise<unknown>)[] = []
afterAll(() => Promise.all(servers.map((close) => close())))

/** Listens on a free port it verified; returns the base URL. */
async function listen(server: Server): Promise<string> {
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  servers.push(() => new Promise((resolve) => server.close(resolve)))
  return `http://127.0.0.1:${port}`
}

const [API, LOGIN] = limiters as [Record<string, unknown>, Record<string, unknown>]

// The suites below run at once (each on its own prefix and keys); the tests of each, one after another.
describe.concurrent('ratewindow', () => {
  describe.sequential('an Express app on standalone Redis honours what the CLI did at its next decision (the CLI from its packed tarball, in a fresh project)', () => {
    let base: string
    let redis: string[]
    let cli: (args: readonly string[]) => Promise<Ran>
    beforeAll(async () => {
      const project = await packedProject()
      servers.push(async () => project.close())
      cli = (args) => ratewindow(args, { bin: project.bin })
      const prefix = uniquePrefix()
      const store = new RedisStore({ client: standaloneClient(), prefix })
      const app = express()
      app.use(expressRateLimit({ ...API, store, key: (request) => request.get('x-user') ?? 'anonymous' }))
      app.get('/', (_request, response) => void response.send('ok'))
      base = await listen(createServer(app))
      redis = [
        '--redis',
        `redis://127.0.0.1:${redisEnvironment().standalonePort}`,
        '--prefix',
        prefix,
        '--config',
        project.config,
        '--limiter',
        'api',
      ]
    })
    const get = (user: string) =>
      fetch(base, { headers: { 'x-user': user } }).then((response) => response.status)

    it('inspect shows the requests made; block refuses the next request, unblock lets it in', async () => {
      expect([await get('alice'), await get('alice')]).toEqual([200, 200])
      const inspected = await cli(['inspect', 'alice', ...redis, '--json'])
      expect(inspected.code).toBe(0)
      expect(inspected.json()).toEqual({
        key: 'alice',
        hash: storedHash('alice'),
        limiters: [
          {
            limiter: 'api',
            namespace: 'api:fw3600000x5:',
            key: 'alice',
            at: expect.any(Number),
            rules: [
              {
                name: '5-per-1h',
                algorithm: 'fixed-window',
                limit: 5,
                overridden: false,
                used: 2,
                remaining: 3,
                nextFree: 0,
                reset: expect.any(Number),
              },
            ],
          },
        ],
      })
      const blocked = await cli(['block', 'alice', '--for', '1h', '--reason', 'ticket 7', ...redis, '--json'])
      expect(blocked.code).toBe(0)
      expect(blocked.json()).toEqual({
        key: 'alice',
        limiter: 'api',
        until: expect.any(Number),
        reason: 'ticket 7',
      })
      expect(await get('alice')).toBe(429)
      expect((await cli(['unblock', 'alice', ...redis, '--json'])).json()).toEqual({ ok: true })
      expect(await get('alice')).toBe(200)
    })

    it('an override changes the limit at the next request; reset clears the counters and keeps the override', async () => {
      const set = await cli(['overrides', 'set', 'bob', '--limit', '1', '--ttl', '1d', ...redis, '--json'])
      expect(set.code).toBe(0)
      expect(set.json()).toEqual({
        key: 'bob',
        limiter: 'api',
        override: { limit: 1, until: expect.any(Number) },
      })
      expect([await get('bob'), await get('bob')]).toEqual([200, 429])
      expect((await cli(['reset', 'bob', ...redis, '--json'])).json()).toEqual({ ok: true })
      expect([await get('bob'), await get('bob')]).toEqual([200, 429])
      const listed = await cli(['overrides', 'list', ...redis, '--json'])
      expect(listed.json()).toEqual({
        limiter: 'api',
        records: [{ key: 'bob', limits: { limit: 1, until: expect.any(Number) } }],
        cursor: null,
      })
      expect((await cli(['overrides', 'delete', 'bob', ...redis, '--json'])).json()).toEqual({ ok: true })
      const gone = await cli(['overrides', 'get', 'bob', ...redis, '--json'])
      expect(gone.code).toBe(3)
      expect(gone.json()).toEqual({
        error: { code: 'ERR_RATEWINDOW_NOT_FOUND', message: expect.stringContaining('bob') },
      })
    })

    it('limiters and top name what the config names, and show the raw key where a record holds it', async () => {
      await get('carol')
      await cli(['block', 'carol', '--for', '1m', ...redis])
      for (let i = 0; i < 4; i++) await get('dave')
      const found = await cli(['limiters', ...redis, '--json'])
      expect(found.json()).toEqual({
        limiters: expect.arrayContaining([
          {
            name: 'api',
            namespace: 'api:fw3600000x5:',
            prefix: 'api',
            group: null,
            routeScoped: false,
            rules: [
              { name: '5-per-1h', id: 'fw3600000', algorithm: 'fixed-window', limit: 5, window: 3_600_000 },
            ],
            keys: expect.any(Number),
          },
        ]),
        overrideScopes: [
          {
            name: 'api',
            scope: expect.stringMatching(/^api:o\.n=/),
            prefix: 'api',
            group: null,
            records: expect.any(Number),
          },
        ],
        scanned: expect.any(Number),
        complete: true,
      })
      const top = (await cli(['top', '--count', '2', ...redis, '--json'])).json()
      expect(top.keys).toEqual([
        {
          limiter: 'api',
          key: 'carol',
          hashed: false,
          rule: '5-per-1h',
          used: 1,
          limit: 5,
          remaining: 0,
          reset: expect.any(Number),
          blocked: true,
        },
        {
          limiter: 'api',
          key: storedHash('dave'),
          hashed: true,
          rule: '5-per-1h',
          used: 4,
          limit: 5,
          remaining: 1,
          reset: expect.any(Number),
          blocked: false,
        },
      ])
    })
  })

  /** SCAN calls served so far by each master of the Cluster. */
  async function scansServed(cluster: Cluster): Promise<number> {
    let total = 0
    for (const node of cluster.nodes('master')) {
      const stats = await node.info('commandstats')
      total += Number(/cmdstat_scan:calls=(\d+)/.exec(stats)?.[1] ?? 0)
    }
    return total
  }

  describe('a Fastify app on a Redis Cluster honours what the CLI did at its next decision', () => {
    let base: string
    let redis: string[]
    let cluster: Cluster
    beforeAll(async () => {
      const prefix = uniquePrefix()
      cluster = clusterClient()
      const app = Fastify()
      await app.register(fastifyRateLimit, {
        ...LOGIN,
        store: new RedisStore({ client: cluster, prefix }),
        key: (request) => String(request.headers['x-user'] ?? 'anonymous'),
      })
      app.get('/', async () => 'ok')
      const port = await freePort()
      await app.listen({ port, host: '127.0.0.1' })
      servers.push(() => app.close())
      base = `http://127.0.0.1:${port}`
      const [node] = redisEnvironment().clusterNodes
      redis = [
        '--redis',
        `redis://${node!.host}:${node!.port}`,
        '--prefix',
        prefix,
        '--config',
        CONFIG,
        '--limiter',
        'login',
      ]
    })
    const get = (user: string) =>
      fetch(base, { headers: { 'x-user': user } }).then((response) => response.status)

    it('inspect, block, override and reset through the Cluster; one key is found through its slot, no SCAN', async () => {
      expect(await get('erin')).toBe(200)
      const inspected = (await ratewindow(['inspect', 'erin', ...redis, '--json'])).json()
      expect(inspected.limiters[0].rules[0]).toMatchObject({
        algorithm: 'sliding-window-counter',
        limit: 3,
        used: 1,
      })
      const scans = await scansServed(cluster)
      const noConfig = redis.filter(
        (arg, i) =>
          arg !== '--config' &&
          redis[i - 1] !== '--config' &&
          arg !== '--limiter' &&
          redis[i - 1] !== '--limiter',
      )
      const found = await ratewindow(['inspect', 'erin', ...noConfig, '--json'])
      expect(found.code).toBe(0)
      expect(found.json().limiters.map((each: { namespace: string }) => each.namespace)).toEqual([
        'login:swc3600000x3:',
      ])
      expect(await scansServed(cluster)).toBe(scans)
      const scanned = (await ratewindow(['limiters', ...redis, '--json'])).json()
      expect(scanned.limiters).toContainEqual(
        expect.objectContaining({ name: 'login', namespace: 'login:swc3600000x3:', keys: 1 }),
      )
      expect((await ratewindow(['block', 'erin', '--for', '1h', ...redis])).code).toBe(0)
      expect(await get('erin')).toBe(429)
      await ratewindow(['unblock', 'erin', ...redis])
      await ratewindow(['overrides', 'set', 'erin', '--limit', '2', ...redis])
      expect([await get('erin'), await get('erin')]).toEqual([200, 429])
      await ratewindow(['reset', 'erin', ...redis])
      expect([await get('erin'), await get('erin'), await get('erin')]).toEqual([200, 200, 429])
    })
  })

  describe('top', () => {
    it('finds the 10 most limited keys of 10,000', async () => {
      const prefix = uniquePrefix()
      const client: Redis = standaloneClient()
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 100, window: '1h' }),
        store: new RedisStore({ client, prefix }),
      })
      const keys = Array.from({ length: 10_000 }, (_, i) => `client-${i}`)
      for (let at = 0; at < keys.length; at += 2000)
        await Promise.all(keys.slice(at, at + 2000).map((key) => limiter.limit(key)))
      const most = keys.filter((_, i) => i % 997 === 3).slice(0, 10)
      for (const [i, key] of most.entries()) await limiter.overrides.take(key, 20 + i)
      const port = redisEnvironment().standalonePort
      const top = await ratewindow([
        'top',
        '--redis',
        `redis://127.0.0.1:${port}`,
        '--prefix',
        prefix,
        '--count',
        '10',
        '--json',
      ])
      expect(top.code).toBe(0)
      const result = top.json()
      expect(result.scanned).toBe(10_000)
      expect(result.keys.map((row: { key: string }) => row.key)).toEqual(
        most.map((key) => storedHash(key)).reverse(),
      )
      expect(result.keys[0]).toEqual({
        limiter: 'rw:fw3600000x100:',
        key: storedHash(most[9]!),
        hashed: true,
        rule: '100-per-1h',
        used: 30,
        limit: 100,
        remaining: 70,
        reset: expect.any(Number),
        blocked: false,
      })
      const bounded = (
        await ratewindow([
          'top',
          '--redis',
          `redis://127.0.0.1:${port}`,
          '--prefix',
          prefix,
          '--scan',
          '500',
          '--json',
        ])
      ).json()
      expect(bounded).toMatchObject({ scanned: 500, complete: false })
    })
  })

  describe('watch --once reads the admin endpoints', () => {
    it('one frame: top keys, and each endpoint’s stats with the bearer token sent', async () => {
      const seen: (string | undefined)[] = []
      const stats = {
        since: 1,
        decisions: { api: { allowed: 9, refused: 2 } },
        refused: [{ limiter: 'api', key: 'mallory', count: 2 }],
      }
      const admin = await listen(
        createServer((request, response) => {
          seen.push(request.headers.authorization)
          response.writeHead(request.url === '/_ratewindow/stats' ? 200 : 404, {
            'content-type': 'application/json; charset=utf-8',
          })
          response.end(
            JSON.stringify(
              request.url === '/_ratewindow/stats'
                ? stats
                : { error: { code: 'ERR_RATEWINDOW_NOT_FOUND', message: 'no' } },
            ),
          )
        }),
      )
      const args = [
        'watch',
        '--once',
        '--redis',
        `redis://127.0.0.1:${redisEnvironment().standalonePort}`,
        '--prefix',
        uniquePrefix(),
        '--admin',
        `${admin}/_ratewindow`,
        '--json',
      ]
      const frame = await ratewindow(args, { env: { RATEWINDOW_ADMIN_TOKEN: 's3cret' } })
      expect(frame.code).toBe(0)
      expect(frame.json()).toEqual({
        at: expect.any(Number),
        top: { keys: [], scanned: 0, complete: true },
        admin: [{ url: `${admin}/_ratewindow`, stats }],
      })
      expect(seen).toEqual(['Bearer s3cret'])
      const text = await ratewindow(
        args.filter((arg) => arg !== '--json'),
        { env: { RATEWINDOW_ADMIN_TOKEN: 's3cret' } },
      )
      expect(text.stdout).toContain('mallory')
      const failed = await ratewindow([
        'watch',
        '--once',
        ...args.slice(2, 6),
        '--admin',
        `${admin}/elsewhere`,
        '--json',
      ])
      expect(failed.code).toBe(1)
    })
    it('against a real admin endpoint: the process’s decisions and the keys it refused most', async () => {
      const stats = adminStats()
      const limiter = expressRateLimit({
        limit: 2,
        window: '1m',
        name: 'api',
        key: (request) => request.get('x-user') ?? 'anonymous',
        observer: stats,
      })
      const admin = adminHandler({
        limiters: [limiter],
        authorize: (request) => request.headers.get('authorization') === 'Bearer s3cret',
        stats,
        basePath: '/_ratewindow',
      })
      const app = express()
      app.use(expressAdmin(admin))
      app.get('/api', limiter, (_request, response) => {
        response.send('ok')
      })
      const base = await listen(createServer(app))
      const statuses: number[] = []
      for (const [user, times] of [
        ['alice', 3],
        ['mallory', 4],
      ] as const)
        for (let i = 0; i < times; i++)
          statuses.push((await fetch(`${base}/api`, { headers: { 'x-user': user } })).status)
      expect(statuses).toEqual([200, 200, 429, 200, 200, 429, 429])
      const args = [
        'watch',
        '--once',
        '--redis',
        `redis://127.0.0.1:${redisEnvironment().standalonePort}`,
        '--prefix',
        uniquePrefix(),
        '--admin',
        `${base}/_ratewindow`,
      ]
      const frame = await ratewindow([...args, '--json'], { env: { RATEWINDOW_ADMIN_TOKEN: 's3cret' } })
      expect(frame.code).toBe(0)
      expect(frame.json()).toMatchObject({
        admin: [
          {
            url: `${base}/_ratewindow`,
            stats: {
              decisions: { api: { allowed: 4, refused: 3 } },
              refused: [
                { limiter: 'api', key: 'mallory', count: 2 },
                { limiter: 'api', key: 'alice', count: 1 },
              ],
            },
          },
        ],
      })
      const text = await ratewindow(args, { env: { RATEWINDOW_ADMIN_TOKEN: 's3cret' } })
      expect(text.stdout).toContain('mallory')
      // Without the token, the endpoint refuses: the frame fails, saying so.
      const refused = await ratewindow([...args, '--json'])
      expect(refused.code).toBe(1)
      expect(refused.json()).toMatchObject({
        admin: [{ url: `${base}/_ratewindow`, error: 'HTTP 401: This endpoint needs authorization.' }],
      })
    })
  })

  describe('exit codes and usage', () => {
    it('0 help, 2 usage, 3 not found, 4 Redis unreachable; --json errors are { error: { code, message } }', async () => {
      const help = await ratewindow(['--help'])
      expect(help.code).toBe(0)
      for (const command of [
        'limiters',
        'top',
        'watch',
        'inspect',
        'reset',
        'block',
        'unblock',
        'overrides set',
      ])
        expect(help.stdout).toContain(`ratewindow ${command}`)
      expect((await ratewindow(['frobnicate'])).code).toBe(2)
      expect((await ratewindow(['help', 'top'])).stdout).toContain('--count N')
      expect((await ratewindow(['help', 'frobnicate'])).code).toBe(2)
      expect((await ratewindow(['inspect'])).code).toBe(2)
      expect((await ratewindow(['top', '--count', 'many'])).code).toBe(2)
      const redis = [
        '--redis',
        `redis://127.0.0.1:${redisEnvironment().standalonePort}`,
        '--prefix',
        uniquePrefix(),
      ]
      expect((await ratewindow(['block', 'k', '--for', '1h', ...redis])).code).toBe(2)
      expect((await ratewindow(['inspect', 'nobody', ...redis])).code).toBe(3)
      expect(
        (await ratewindow(['inspect', 'k', ...redis, '--config', CONFIG, '--limiter', 'nope'])).code,
      ).toBe(3)
      const unreachable = await ratewindow([
        'limiters',
        '--redis',
        `redis://127.0.0.1:${await freePort()}`,
        '--json',
      ])
      expect(unreachable.code).toBe(4)
      expect(unreachable.json()).toEqual({
        error: {
          code: 'ERR_RATEWINDOW_REDIS_UNREACHABLE',
          message: expect.stringContaining('could not be reached'),
        },
      })
      expect(unreachable.stderr).toBe('')
    })
  })
})
