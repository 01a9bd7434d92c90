/**
 * @ratewindow/hono on Cloudflare Workers for real (issue 22): workerd from npm (the `miniflare` devDependency
 * brings the `workerd` binary) runs Workers bundled from the built packages, with no compatibility flag (no
 * `nodejs_compat`): the test app (workerd-app.ts), and examples/hono/src/worker.ts with its Durable Object
 * bound as examples/hono/wrangler.toml binds it (the example's serve check), twice (a second isolate bound to
 * the first one's objects). One miniflare instance for the file runs all three.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Miniflare } from 'miniflare'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runtimeProject } from './project.js'
import { bundleWorker, COMPATIBILITY_DATE, DATE_WITHOUT_WEAKREF } from './workerd-support.js'

let mf: Miniflare
let removeProject = () => {}
const example = join(import.meta.dirname, '../../examples/hono')

/** The settings of the example's wrangler.toml that miniflare needs (wrangler reads the same ones). */
function wranglerConfig() {
  const toml = readFileSync(join(example, 'wrangler.toml'), 'utf8')
  const value = (key: string) => new RegExp(`^${key}\\s*=\\s*"([^"]*)"`, 'm').exec(toml)?.[1]
  const binding =
    /\[\[durable_objects\.bindings\]\]\s*name\s*=\s*"([^"]+)"\s*class_name\s*=\s*"([^"]+)"/.exec(toml)
  return {
    main: value('main')!,
    compatibilityDate: value('compatibility_date')!,
    flags: /^compatibility_flags/m.test(toml),
    binding: binding![1]!,
    className: binding![2]!,
    sqlite: new RegExp(`new_sqlite_classes\\s*=\\s*\\["${binding![2]}"\\]`).test(toml),
  }
}

beforeAll(async () => {
  const project = await runtimeProject([], [], ['core', 'hono', 'cloudflare'])
  removeProject = project.remove
  const app = await bundleWorker(join(import.meta.dirname, 'workerd-app.ts'), project.dir)
  const config = wranglerConfig()
  const worker = await bundleWorker(join(example, config.main), project.dir)
  mf = new Miniflare({
    workers: [
      {
        name: 'app',
        modules: [{ type: 'ESModule', path: 'worker.js', contents: app }],
        compatibilityDate: COMPATIBILITY_DATE,
        compatibilityFlags: [],
      },
      {
        // The test app again, on a compatibility date without WeakRef (issue 32, item 12).
        name: 'old',
        routes: ['old.test/*'],
        modules: [{ type: 'ESModule', path: 'worker.js', contents: app }],
        compatibilityDate: DATE_WITHOUT_WEAKREF,
        compatibilityFlags: [],
      },
      {
        name: 'example',
        routes: ['example.test/*'],
        modules: [{ type: 'ESModule', path: 'worker.js', contents: worker }],
        compatibilityDate: config.compatibilityDate,
        compatibilityFlags: [],
        durableObjects: { [config.binding]: { className: config.className, useSQLite: config.sqlite } },
      },
      {
        // The same Worker again, in an isolate of its own, bound to the first one's objects: as two isolates
        // (or two locations) of one deployment are.
        name: 'second',
        routes: ['second.test/*'],
        modules: [{ type: 'ESModule', path: 'worker.js', contents: worker }],
        compatibilityDate: config.compatibilityDate,
        compatibilityFlags: [],
        durableObjects: {
          [config.binding]: { className: config.className, scriptName: 'example', useSQLite: config.sqlite },
        },
      },
    ],
  })
  await mf.ready
}, 120_000)

afterAll(async () => {
  await mf?.dispose()
  removeProject()
})

interface Answer {
  status: number
  headers: Record<string, string>
  body: string
}

async function ask(path: string, ip = '203.0.113.7', host = 'worker.test'): Promise<Answer> {
  const response = await mf.dispatchFetch(`http://${host}${path}`, {
    headers: { 'CF-Connecting-IP': ip },
  })
  const headers = Object.fromEntries(
    [...response.headers].filter(([name]) => name.startsWith('ratelimit') || name === 'retry-after'),
  )
  return { status: response.status, headers, body: await response.text() }
}

async function state(): Promise<{ warnings: string[]; waitUntil: number; settled: number }> {
  return (await mf.dispatchFetch('http://worker.test/state')).json() as never
}

describe('@ratewindow/hono on workerd (Cloudflare Workers), without nodejs_compat', () => {
  it('runs as a Worker: navigator.userAgent is Cloudflare-Workers, no process nor Buffer global', async () => {
    const answer = await mf.dispatchFetch('http://worker.test/runtime')
    expect(await answer.json()).toEqual({
      userAgent: 'Cloudflare-Workers',
      process: 'undefined',
      Buffer: 'undefined',
      WeakRef: 'function',
    })
  })

  it(`runs on a compatibility date without WeakRef (${DATE_WITHOUT_WEAKREF}): limiters built at load, 200, 200, then 429 (regression: every request a 500)`, async () => {
    const runtime = await (await mf.dispatchFetch('http://old.test/runtime')).json()
    expect(runtime).toMatchObject({ userAgent: 'Cloudflare-Workers', WeakRef: 'undefined' })
    const answers = [
      await ask('/memory', '203.0.113.8', 'old.test'),
      await ask('/memory', '203.0.113.8', 'old.test'),
      await ask('/memory', '203.0.113.8', 'old.test'),
    ]
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 429])
    expect(answers[0]!.body).toBe('ok 203.0.113.8')
  })

  it('limits by CF-Connecting-IP: 200, 200, then 429 with RateLimit headers, Retry-After and the 429 body', async () => {
    const answers = [await ask('/memory'), await ask('/memory'), await ask('/memory')]
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 429])
    // The key is the address Cloudflare set, read through Hono's getConnInfo for Workers.
    expect(answers[0]!.body).toBe('ok 203.0.113.7')
    expect(answers[0]!.headers).toMatchObject({
      'ratelimit-policy': '2;w=60',
      'ratelimit-limit': '2',
      'ratelimit-remaining': '1',
    })
    const denied = answers[2]!
    expect(denied.headers['ratelimit-remaining']).toBe('0')
    const retryAfter = Number(denied.headers['retry-after'])
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(120) // the sliding window counter waits up to two windows
    expect(denied.headers['ratelimit-reset']).toBe(denied.headers['retry-after'])
    expect(JSON.parse(denied.body)).toMatchObject({ error: 'Too Many Requests', retryAfter })
    // Another client address has its own counter.
    expect(await ask('/memory', '198.51.100.2')).toMatchObject({ status: 200, body: 'ok 198.51.100.2' })
  })

  // Issue 32: the hono README said `CF-Connecting-IP` was the local address under `wrangler dev`; its local server
  // (miniflare's, as here) sets it only when the request carries none.
  it("over HTTP as wrangler dev serves it: the caller's address, or a CF-Connecting-IP the client sent, as it is", async () => {
    const url = await mf.ready
    const plain = await fetch(new URL('/memory', url))
    expect(await plain.text()).toBe('ok 127.0.0.1')
    const chosen = await fetch(new URL('/memory', url), { headers: { 'CF-Connecting-IP': '192.0.2.77' } })
    expect(await chosen.text()).toBe('ok 192.0.2.77')
  })

  it('the default memory store warns once, at its first use, that it counts per isolate, naming the Durable Object store', async () => {
    const perIsolate = (warnings: string[]) =>
      warnings.filter((warning) => warning.includes('RATEWINDOW_PER_ISOLATE_STORE'))
    // Loaded, and MemoryStores given explicitly have decided (the test above): no warning yet.
    expect(perIsolate((await state()).warnings)).toEqual([])
    const answers = [await ask('/default'), await ask('/default'), await ask('/default')]
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 429])
    const warnings = perIsolate((await state()).warnings)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('counts in this Workers isolate only')
    expect(warnings[0]).toContain('@ratewindow/cloudflare')
  })

  it('a failing store keeps answering: 200 ×3 by the default failure policy, with no invented headers', async () => {
    const answers = [await ask('/failing'), await ask('/failing'), await ask('/failing')]
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200])
    for (const answer of answers) expect(answer.headers).toEqual({})
  })

  it('work after the response (a refund of a failed request) goes through executionCtx.waitUntil', async () => {
    const before = await state()
    // Limit 1: each 500 is given back after its response, so the next request is admitted again.
    const answers = [await ask('/refund'), await ask('/refund'), await ask('/refund')]
    expect(answers.map((answer) => answer.status)).toEqual([500, 500, 500])
    expect(answers[0]!.headers['ratelimit-remaining']).toBe('0')
    const after = await state()
    expect(after.waitUntil - before.waitUntil).toBe(3)
    expect(after.settled - before.settled).toBe(3)
  })
})

describe('examples/hono on Workers: src/worker.ts in workerd, its Durable Object bound as wrangler.toml binds it', () => {
  it('wrangler.toml sets no compatibility flag and binds RateLimiterObject with a SQLite migration', () => {
    expect(wranglerConfig()).toMatchObject({
      main: 'src/worker.ts',
      flags: false,
      binding: 'RATE_LIMITER',
      className: 'RateLimiterObject',
      sqlite: true,
    })
  })

  it('serves: GET / ×5 → 200; GET / → 429 with Retry-After; POST /login ×3 → 200, then 429 (per client)', async () => {
    const send = async (method: string, path: string, ip: string) => {
      const response = await mf.dispatchFetch(`http://example.test${path}`, {
        method,
        headers: { 'CF-Connecting-IP': ip },
      })
      await response.arrayBuffer()
      return { status: response.status, retryAfter: response.headers.get('retry-after') }
    }
    const home: number[] = []
    for (let i = 0; i < 5; i++) home.push((await send('GET', '/', '192.0.2.10')).status)
    expect(home).toEqual([200, 200, 200, 200, 200])
    const denied = await send('GET', '/', '192.0.2.10')
    expect(denied.status).toBe(429)
    expect(Number(denied.retryAfter)).toBeGreaterThanOrEqual(1)
    const login: number[] = []
    for (let i = 0; i < 4; i++) login.push((await send('POST', '/login', '192.0.2.11')).status)
    expect(login).toEqual([200, 200, 200, 429])
  })

  it('two isolates share one count through the Durable Objects: 5 across both, then 429 on either', async () => {
    const send = async (host: string) => {
      const response = await mf.dispatchFetch(`http://${host}/`, {
        headers: { 'CF-Connecting-IP': '192.0.2.12' },
      })
      await response.arrayBuffer()
      return response.status
    }
    const statuses: number[] = []
    for (const host of ['example.test', 'second.test', 'example.test', 'second.test', 'example.test'])
      statuses.push(await send(host))
    expect(statuses).toEqual([200, 200, 200, 200, 200])
    expect([await send('second.test'), await send('example.test')]).toEqual([429, 429])
  })
})
