/**
 * `@ratewindow/h3` in a real Nitro 2 server (h3 1 inside), from the packed tarballs: the app in nitro-app/ (its
 * limiters in `middleware/`, as Nuxt's `server/middleware/` holds them, and a plugin that closes the Redis client)
 * is built once (`nitro build`) and served by `node .output/server/index.mjs` twice, on the memory store and on
 * Redis (chosen at start). The h3 2 and h3 1 apps served by Node run in packages/h3/test.
 *
 * nitropack and ioredis are installed once into .tmp/nitro-apps/<versions' hash> (gitignored); the app is not built
 * again while its inputs (tarballs, fixture) are those of its last build.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { standaloneClient } from '../support/redis.js'
import {
  builtApp,
  fromBehindProxy,
  installed,
  type Served,
  type Store,
  serveBuilt,
  servedOnEachStore,
} from './built-app.js'
import { run } from './project.js'

/** The newest Nitro 2 (on h3 1), at exact versions. */
const VERSIONS = { nitropack: '2.13.6', h3: '1.15.11', ioredis: '5.11.1' }

/** Nitro's built server on a free port with `env`, once it answers (bounded: 30 s). */
const serve = (app: string, env: Record<string, string>) =>
  serveBuilt(
    app,
    ['.output/server/index.mjs'],
    env,
    () => ({ NITRO_SHUTDOWN_TIMEOUT: '1000' }),
    'the Nitro server',
  )

const work = mkdtempSync(join(tmpdir(), 'ratewindow-nitro-'))
/** Each store's server, started at once for both as soon as the app is built. */
let starting = new Map<Store, Promise<Served>>()
const prefixOf = (store: Store) => `nitro-test-${process.pid}-${store}:`

beforeAll(async () => {
  const install = await installed('nitro', VERSIONS)
  const app = await builtApp({
    install,
    name: 'app',
    fixture: join(import.meta.dirname, 'nitro-app'),
    packages: ['core', 'h3'],
    work,
    build: (dir) =>
      run(
        process.execPath,
        [join(install, 'node_modules', 'nitropack', 'dist', 'cli', 'index.mjs'), 'build'],
        {
          cwd: dir,
          env: { ...process.env, NODE_ENV: 'production' },
          maxBuffer: 16 * 1024 * 1024,
        },
      ),
  })
  starting = await servedOnEachStore((env) => serve(app, env), prefixOf)
}, 300_000)

afterAll(() => rmSync(work, { recursive: true, force: true }))

describe.each<Store>(['memory', 'redis'])('Nitro 2 (node-server), on %s', (store) => {
  let served: Served
  const prefix = prefixOf(store)
  beforeAll(async () => {
    served = await starting.get(store)!
  }, 60_000)
  afterAll(() => served?.stop())

  it('server middleware: 200s with the RateLimit headers and event.context.rateLimit, then 429 with them, Retry-After and the body', async () => {
    const url = `${served.url}/api/limited`
    for (let call = 1; call <= 3; call++) {
      const response = await fetch(url)
      expect(response.status).toBe(200)
      expect(response.headers.get('ratelimit-remaining')).toBe(String(3 - call))
      expect(await response.json()).toEqual({ remaining: 3 - call })
    }
    const refused = await fetch(url)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('ratelimit-limit')).toBe('3')
    expect(refused.headers.get('ratelimit-remaining')).toBe('0')
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(await refused.text()).toMatch(/too many requests/i)
    const outside = await fetch(`${served.url}/api/free`)
    expect([outside.status, outside.headers.get('ratelimit-limit')]).toEqual([200, null])
  })

  it('keyed by the connection: a spoofed X-Forwarded-For without trust does not change the key', async () => {
    for (let claimed = 0; claimed < 4; claimed++)
      await fromBehindProxy(`${served.url}/api/limited`, `198.51.100.${claimed}`)
    expect((await fromBehindProxy(`${served.url}/api/limited`, '198.51.100.99')).status).toBe(429)
  })

  it('with trustProxy: 1, the entry the proxy wrote is the key, whatever the client wrote before it', async () => {
    const url = `${served.url}/api/trusted`
    for (let call = 0; call < 3; call++)
      expect((await fromBehindProxy(url, '203.0.113.20', `10.0.0.${call}`)).status).toBe(200)
    expect((await fromBehindProxy(url, '203.0.113.20', '10.9.9.9')).status).toBe(429)
    expect((await fromBehindProxy(url, '203.0.113.21', '203.0.113.20')).status).toBe(200)
  })

  it('60 concurrent requests at a limit of 20 admit exactly 20', async () => {
    const statuses = await Promise.all(
      Array.from({ length: 60 }, () => fetch(`${served.url}/api/flood`).then((each) => each.status)),
    )
    expect(statuses.filter((status) => status === 200)).toHaveLength(20)
    expect(statuses.filter((status) => status === 429)).toHaveLength(40)
  })

  it('skipFailedRequests: failed responses are given back, successful ones count', async () => {
    const url = `${served.url}/api/failing`
    for (let call = 0; call < 4; call++)
      expect((await fromBehindProxy(`${url}?status=503`, '203.0.113.30')).status).toBe(503)
    expect((await fromBehindProxy(url, '203.0.113.30')).status).toBe(200)
    expect((await fromBehindProxy(url, '203.0.113.30')).status).toBe(200)
    expect((await fromBehindProxy(url, '203.0.113.30')).status).toBe(429)
  })

  it('the failure policy on a dead store: onStoreError allow serves, deny answers 503', async () => {
    const open = await fetch(`${served.url}/api/dead-open`)
    expect([open.status, await open.text()]).toEqual([200, 'ok'])
    expect((await fetch(`${served.url}/api/dead-closed`)).status).toBe(503)
  })

  it('slowDown: the requests after delayAfter are delayed, with event.context.slowDown', async () => {
    const url = `${served.url}/api/slow`
    expect(await (await fromBehindProxy(url, '203.0.113.50')).json()).toMatchObject({ used: 1, delay: 0 })
    expect(await (await fromBehindProxy(url, '203.0.113.50')).json()).toMatchObject({ used: 2, delay: 20 })
  })

  if (store === 'redis')
    it('counted in Redis: the counters are under the prefix the server was started with', async () => {
      expect((await standaloneClient().keys(`${prefix}*`)).length).toBeGreaterThanOrEqual(4)
    })
})
