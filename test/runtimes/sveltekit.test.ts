/**
 * `@ratewindow/sveltekit` in a real SvelteKit 2 app, from the packed tarballs: the app in sveltekit-app/ is built
 * once (`vite build` with adapter-node 5) and served by `node build` twice, on the memory store and on Redis
 * (chosen at start). The `handle` hooks (in `sequence`), an endpoint's own limit (`withRateLimit`), a form action
 * (`rateLimitAction`) and `slowDown` must answer as every adapter does; the attacks that need a served app
 * (packages/sveltekit/test/served-attacks.ts, named by packages/sveltekit/test/hostile.test.ts) run here too.
 *
 * SvelteKit, its adapter, Svelte, Vite and ioredis are installed once into .tmp/sveltekit-apps/<versions' hash>
 * (gitignored); the app is not built again while its inputs (tarballs, fixture) are those of its last build.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeKitAttacks } from '../../packages/sveltekit/test/served-attacks.js'
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

/** The newest SvelteKit 2 with the adapter-node major that accepts it (6 wants Kit 3), at exact versions. */
const VERSIONS = {
  '@sveltejs/kit': '2.70.4',
  '@sveltejs/adapter-node': '5.5.7',
  '@sveltejs/vite-plugin-svelte': '7.3.1',
  svelte: '5.59.2',
  vite: '8.4.0',
  ioredis: '5.11.1',
}

/** `node build` of `app` (adapter-node's server) on a free port with `env`, once it answers (bounded: 30 s). */
const serve = (app: string, env: Record<string, string>) =>
  serveBuilt(
    app,
    ['build'],
    env,
    // Once stopped, open keep-alive connections are closed after 1 s rather than 30.
    (port) => ({ ORIGIN: `http://127.0.0.1:${port}`, SHUTDOWN_TIMEOUT: '1', NODE_ENV: 'production' }),
    'node build',
  )

const work = mkdtempSync(join(tmpdir(), 'ratewindow-sveltekit-'))
/** Each store's server, started at once for both as soon as the app is built. */
let starting = new Map<Store, Promise<Served>>()
const prefixOf = (store: Store) => `sveltekit-test-${process.pid}-${store}:`

beforeAll(async () => {
  const install = await installed('sveltekit', VERSIONS)
  const app = await builtApp({
    install,
    name: 'app',
    fixture: join(import.meta.dirname, 'sveltekit-app'),
    packages: ['core', 'sveltekit'],
    work,
    build: (dir) =>
      run(process.execPath, [join(install, 'node_modules', 'vite', 'bin', 'vite.js'), 'build'], {
        cwd: dir,
        env: { ...process.env, NODE_ENV: 'production' },
        maxBuffer: 16 * 1024 * 1024,
      }),
  })
  starting = await servedOnEachStore((env) => serve(app, env), prefixOf)
}, 300_000)

afterAll(() => rmSync(work, { recursive: true, force: true }))

describe.each<Store>(['memory', 'redis'])('SvelteKit 2 (adapter-node), on %s', (store) => {
  let served: Served
  const prefix = prefixOf(store)
  beforeAll(async () => {
    served = await starting.get(store)!
  }, 60_000)
  afterAll(() => served?.stop())

  it('the handle hook: 200s with the RateLimit headers and event.locals.rateLimit, then 429 with them, Retry-After and the body', async () => {
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
    expect(outside.status).toBe(200)
    expect(outside.headers.get('ratelimit-limit')).toBeNull()
  })

  it('keys by event.getClientAddress(): a spoofed X-Forwarded-For without trust does not change the key', async () => {
    // /api/limited is spent by the case above (or here): every address a client claims is the same one client.
    for (let claimed = 0; claimed < 4; claimed++)
      await fromBehindProxy(`${served.url}/api/limited`, `198.51.100.${claimed}`)
    const claimed = await fromBehindProxy(`${served.url}/api/limited`, '198.51.100.99')
    expect(claimed.status).toBe(429)
  })

  it('with trustProxy: 1, the entry the proxy wrote is the key, whatever the client wrote before it', async () => {
    const url = `${served.url}/api/trusted`
    for (let call = 0; call < 3; call++)
      expect((await fromBehindProxy(url, '203.0.113.20', `10.0.0.${call}`)).status).toBe(200)
    expect((await fromBehindProxy(url, '203.0.113.20', '10.9.9.9')).status).toBe(429)
    expect((await fromBehindProxy(url, '203.0.113.21', '203.0.113.20')).status).toBe(200)
  })

  it('60 concurrent requests to an endpoint limited to 20 (withRateLimit) admit exactly 20', async () => {
    const responses = await Promise.all(
      Array.from({ length: 60 }, () => fetch(`${served.url}/api/flood`).then((each) => each.status)),
    )
    expect(responses.filter((status) => status === 200)).toHaveLength(20)
    expect(responses.filter((status) => status === 429)).toHaveLength(40)
  })

  it('skipFailedRequests: failed responses are given back, successful ones count', async () => {
    const url = `${served.url}/api/failing`
    for (let call = 0; call < 4; call++)
      expect((await fromBehindProxy(`${url}?status=503`, '203.0.113.30')).status).toBe(503)
    expect((await fromBehindProxy(url, '203.0.113.30')).status).toBe(200)
    const last = await fromBehindProxy(url, '203.0.113.30')
    expect([last.status, last.headers.get('ratelimit-remaining')]).toEqual([200, '0'])
    expect((await fromBehindProxy(url, '203.0.113.30')).status).toBe(429)
  })

  it('the failure policy on a dead store: onStoreError allow serves, deny refuses (503)', async () => {
    const open = await fetch(`${served.url}/api/dead-open`)
    expect([open.status, await open.text()]).toEqual([200, 'served'])
    const closed = await fetch(`${served.url}/api/dead-closed`)
    expect(closed.status).toBe(503)
  })

  it('a form action with rateLimitAction: allowed twice, then fail(429) with retryAfter', async () => {
    const submit = () =>
      fetch(`${served.url}/action`, {
        method: 'POST',
        headers: {
          accept: 'application/json',
          'content-type': 'application/x-www-form-urlencoded',
          origin: served.url,
          'x-sveltekit-action': 'true',
          'x-forwarded-for': '203.0.113.40',
        },
        body: '',
      }).then((response) => response.json() as Promise<{ type: string; status: number; data: string }>)
    expect(await submit()).toMatchObject({ type: 'success' })
    expect(await submit()).toMatchObject({ type: 'success' })
    const refused = await submit()
    expect(refused).toMatchObject({ type: 'failure', status: 429 })
    expect(refused.data).toMatch(/retryAfter/)
  })

  it('slowDown: the requests after delayAfter are delayed, with event.locals.slowDown', async () => {
    const url = `${served.url}/api/slow`
    expect(await (await fromBehindProxy(url, '203.0.113.50')).json()).toMatchObject({ used: 1, delay: 0 })
    expect(await (await fromBehindProxy(url, '203.0.113.50')).json()).toMatchObject({ used: 2, delay: 20 })
  })

  describeKitAttacks({ served: () => served })

  if (store === 'redis')
    it('counted in Redis: the counters are under the prefix the server was started with', async () => {
      const keys = await standaloneClient().keys(`${prefix}*`)
      expect(keys.length).toBeGreaterThanOrEqual(4)
    })
})
