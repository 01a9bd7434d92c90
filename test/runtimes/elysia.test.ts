/**
 * `@ratewindow/elysia` in a real Elysia app (elysia-app.ts), served as its users serve it: on Bun's own server, and
 * on Node through `@elysiajs/node`, each on the memory store and on Redis (chosen at start): 200s then 429 with the
 * RateLimit headers, Retry-After and the body; the decision in the context; `resetKey`; a spoofed X-Forwarded-For
 * without `trustProxy` keys nothing (and with it, the proxy's entry does); 60 concurrent requests at limit 20 admit
 * exactly 20; the failure policy on a dead store (open and closed); `skipFailedRequests` on a handler's 500 and on
 * one that throws; the concurrency slot given back after an answer, a throw and a failed validation (Elysia runs
 * no route's onAfterResponse on its error path: the plugin's onError gives it back); `slowDown`.
 *
 * The app is built once (esbuild: ratewindow from source, Elysia and ioredis from the workspace), into
 * .tmp/elysia-app/<inputs' hash> (gitignored; the older builds removed), and built again only when its inputs
 * changed; the four servers start together.
 */
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { join, relative } from 'node:path'
import { build } from 'esbuild'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from '../support/connections.js'
import { redisEnvironment, uniquePrefix } from '../support/redis.js'
import { freePort, RUNTIMES, root, type ServerProcess, startServer } from './project.js'

const APP = join(import.meta.dirname, 'elysia-app.ts')
const SOURCES = ['packages/core/src', 'packages/elysia/src'].map((dir) => join(root, dir))

function filesOf(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((item) =>
    item.isDirectory() ? filesOf(join(dir, item.name)) : [join(dir, item.name)],
  )
}

/** The app's bundle, built unless one of its inputs' hash exists already. */
async function builtApp(): Promise<string> {
  const hash = createHash('sha256')
  for (const file of [APP, ...SOURCES.flatMap((dir) => filesOf(dir)).sort()])
    hash.update(relative(root, file)).update(readFileSync(file))
  const dir = join(root, '.tmp', 'elysia-app', hash.digest('hex').slice(0, 16))
  const bundle = join(dir, 'elysia-app.mjs')
  if (existsSync(bundle)) return bundle
  const partial = `${dir}.partial-${process.pid}`
  mkdirSync(partial, { recursive: true })
  await build({
    entryPoints: [APP],
    outfile: join(partial, 'elysia-app.mjs'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'es2022',
    conditions: ['@ratewindow/source'],
    external: ['elysia', '@elysiajs/node', 'ioredis'],
    logLevel: 'error',
  })
  rmSync(dir, { recursive: true, force: true })
  renameSync(partial, dir)
  // The builds of older inputs go: one bundle is kept, not one per change.
  for (const older of readdirSync(join(dir, '..')))
    if (join(dir, '..', older) !== dir && !older.includes('.partial-'))
      rmSync(join(dir, '..', older), { recursive: true, force: true })
  return bundle
}

const SERVERS = [
  { runtime: 'Bun', store: 'memory' },
  { runtime: 'Bun', store: 'redis' },
  { runtime: 'Node', store: 'memory' },
  { runtime: 'Node', store: 'redis' },
] as const

const started = new Map<(typeof SERVERS)[number], { url: string; server: ServerProcess }>()

beforeAll(async () => {
  const bundle = await builtApp()
  const redisPort = String(redisEnvironment().standalonePort)
  await Promise.all(
    SERVERS.map(async (entry) => {
      const port = await freePort()
      const [command, ...args] = entry.runtime === 'Bun' ? RUNTIMES.Bun : RUNTIMES.Node
      const server = startServer(command, [...args, bundle], {
        cwd: root,
        env: {
          ...process.env,
          PORT: String(port),
          STORE: entry.store,
          REDIS_PORT: redisPort,
          PREFIX: uniquePrefix(),
          NO_COLOR: '1',
        },
      })
      started.set(entry, { url: `http://127.0.0.1:${port}`, server })
      await until(
        () => {
          if (server.child.exitCode !== null) throw new Error(`the app exited:\n${server.output()}`)
          return server.output().includes('listening')
        },
        () => `the ${entry.runtime} app listened (output so far: ${server.output()})`,
        { within: 20_000, every: 20 },
      )
    }),
  )
}, 60_000)

afterAll(async () => {
  await Promise.all([...started.values()].map(({ server }) => server.stop()))
})

/** A GET from behind one proxy: X-Forwarded-For as a proxy writes it (`claimed` first, then `client`). */
const from = (url: string, client: string, claimed?: string) =>
  fetch(url, { headers: { 'x-forwarded-for': claimed === undefined ? client : `${claimed}, ${client}` } })

describe.each(SERVERS)('on $runtime, $store store', (entry) => {
  const url = (path: string) => `${started.get(entry)!.url}${path}`

  it('answers 200s with RateLimit headers and the decision in ctx.rateLimit, then 429 with Retry-After and the body; resetKey forgets the client', async () => {
    for (let call = 1; call <= 3; call++) {
      const response = await fetch(url('/basic'))
      expect(response.status).toBe(200)
      expect(response.headers.get('ratelimit-limit')).toBe('3')
      expect(response.headers.get('ratelimit-remaining')).toBe(String(3 - call))
      expect(await response.json()).toEqual({ remaining: 3 - call, key: '127.0.0.1' })
    }
    const refused = await fetch(url('/basic'))
    expect(refused.status).toBe(429)
    expect(refused.headers.get('ratelimit-remaining')).toBe('0')
    const retryAfter = Number(refused.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/)
    expect(await refused.json()).toMatchObject({ error: 'Too Many Requests', retryAfter })
    // A route registered before the plugin is not limited.
    const free = await fetch(url('/free'))
    expect([free.status, free.headers.get('ratelimit-limit')]).toEqual([200, null])
    expect((await fetch(url('/reset'), { method: 'POST' })).status).toBe(200)
    expect((await fetch(url('/basic'))).status).toBe(200)
  })

  it('keys by the connection without trustProxy: a spoofed X-Forwarded-For changes nothing', async () => {
    const keys = []
    for (const spoofed of ['203.0.113.1', '203.0.113.2', '198.51.100.3']) {
      const response = await from(url('/untrusted'), spoofed)
      keys.push(response.status === 200 ? await response.text() : response.status)
    }
    expect(keys).toEqual(['127.0.0.1', '127.0.0.1', 429])
  })

  it('with trustProxy: 1, keys by the entry the proxy wrote, whatever the client wrote before it', async () => {
    for (let call = 0; call < 2; call++) {
      const response = await from(url('/proxied'), '203.0.113.20', `10.0.0.${call}`)
      expect([response.status, await response.text()]).toEqual([200, '203.0.113.20'])
    }
    expect((await from(url('/proxied'), '203.0.113.20', '10.9.9.9')).status).toBe(429)
    expect((await from(url('/proxied'), '203.0.113.21', '203.0.113.20')).status).toBe(200)
  })

  it('admits exactly 20 of 60 concurrent requests at limit 20', async () => {
    const statuses = await Promise.all(
      Array.from({ length: 60 }, () =>
        from(url('/flood'), '203.0.113.30').then((response) => response.status),
      ),
    )
    expect(statuses.filter((status) => status === 200)).toHaveLength(20)
    expect(statuses.filter((status) => status === 429)).toHaveLength(40)
  })

  it('on a dead store: lets requests through without headers (onStoreError allow), refuses them with deny', async () => {
    for (let call = 0; call < 3; call++) {
      const open = await fetch(url('/open'))
      expect([open.status, open.headers.get('ratelimit-limit')]).toEqual([200, null])
    }
    const closed = await fetch(url('/closed'))
    expect(closed.status).toBeGreaterThanOrEqual(429)
    expect(await closed.text()).not.toBe('closed')
  })

  it('skipFailedRequests: a handler that answers 500 or throws gives its request back', async () => {
    expect((await fetch(url('/outcome/fails'))).status).toBe(500)
    expect((await fetch(url('/outcome/throws'))).status).toBe(500)
    // The refunds follow the responses: the next requests still have the whole limit.
    await until(
      async () => (await (await fetch(url('/outcome/ok'))).json()).remaining === 1,
      'the two failed requests were given back',
    )
    expect((await fetch(url('/outcome/ok'))).status).toBe(200)
    expect((await fetch(url('/outcome/ok'))).status).toBe(429)
  })

  it('concurrency: the slot comes back after an answer, a handler that throws, and a body that fails validation', async () => {
    const invalid = { method: 'POST', body: '{"n":"x"}', headers: { 'content-type': 'application/json' } }
    const statuses: number[] = []
    // One slot, an hour's lease: a slot not given back would refuse every request after it.
    for (const [path, init] of [
      ['/slot/ok', {}],
      ['/slot/throws', {}],
      ['/slot/validated', invalid],
      ['/slot/ok', {}],
    ] as const) {
      statuses.push((await fetch(url(path), init)).status)
      await until(async () => (await fetch(url('/slot/ok'))).status === 200, `the slot of ${path} came back`)
    }
    expect(statuses).toEqual([200, 500, 422, 200])
  })

  it('slowDown: counts every request and delays those after delayAfter, its info in ctx.slowDown', async () => {
    const first = await (await fetch(url('/slow'))).json()
    const second = await (await fetch(url('/slow'))).json()
    expect(first).toEqual({ used: 1, delay: 0 })
    expect(second).toEqual({ used: 2, delay: 20 })
  })
})
