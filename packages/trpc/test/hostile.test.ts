/**
 * Attacks on `@ratewindow/trpc`, each as the attacker sent it, against real servers: the docs' Next.js route handler
 * (docs/trpc.md, taken from the page as it is written) served over HTTP, and the test servers of servers.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { type AddressInfo, createServer as createTcpServer } from 'node:net'
import { join } from 'node:path'
import { getRequestListener } from '@hono/node-server'
import { initTRPC } from '@trpc/server'
import { createHTTPServer } from '@trpc/server/adapters/standalone'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { parseDoc, root } from '../../../test/docs/snippets.js'
import { until } from '../../../test/support/connections.js'
import { redisEnvironment } from '../../../test/support/redis.js'
import { RedisStore, rateLimit } from '../src/index.js'
import { startServer } from './servers.js'

const closing: (() => Promise<void> | void)[] = []
afterAll(async () => {
  for (const close of closing.reverse()) await close()
})

/**
 * docs/trpc.md's Next.js route handler, as a module of its own (written under .tmp/, where the workspace's packages
 * resolve), imported with `REDIS_URL`; `name` keeps each import apart. The page's prelude declares `verifySession`:
 * the test's stands in for the app's auth (a signed session cookie only this server could have made).
 */
async function docsRouteHandler(
  name: string,
  redisUrl: string,
): Promise<(request: Request) => Promise<Response>> {
  const route = parseDoc('docs/trpc.md').snippets.find(
    (snippet) => snippet.code.includes('fetchRequestHandler') && snippet.code.includes('handler as GET'),
  )
  if (route === undefined) throw new Error('docs/trpc.md has no Next.js route handler')
  const dir = join(root, '.tmp', 'trpc-docs')
  mkdirSync(dir, { recursive: true })
  const file = join(dir, `${name}-${process.pid}.ts`)
  writeFileSync(file, route.code)
  // The snippet reads REDIS_URL when it is imported; the variable is put back at once.
  const before = process.env.REDIS_URL
  process.env.REDIS_URL = redisUrl
  try {
    const module = (await import(file)) as { GET: (request: Request) => Promise<Response> }
    return module.GET
  } finally {
    if (before === undefined) delete process.env.REDIS_URL
    else process.env.REDIS_URL = before
  }
}

;(globalThis as { verifySession?: unknown }).verifySession = async (request: Request) =>
  request.headers.get('cookie') === 'session=signed-by-the-server-for-alice' ? { id: 'alice' } : undefined

/** `handler` served over HTTP on a free loopback port; its URL. */
async function serve(handler: (request: Request) => Promise<Response>): Promise<string> {
  const server: Server = createServer(getRequestListener(handler))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  closing.push(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const call = (url: string, headers: Record<string, string>) =>
  fetch(`${url}/api/trpc/hello`, { headers }).then((response) => response.status)

describe("docs/trpc.md's route handler: keys the client chooses", () => {
  it("forged session cookies, x-real-ip and x-api-key values get no fresh bucket, and no client drains an 'anonymous' one", async () => {
    const url = await serve(
      await docsRouteHandler('forged', `redis://127.0.0.1:${redisEnvironment().standalonePort}`),
    )
    // One client behind the one proxy `trustProxy: 1` trusts (Vercel's, or nginx's in front of next start), with
    // no credentials: its own limit, 100 a minute.
    const behindProxy = (client: string) => ({ 'x-forwarded-for': `203.0.113.250, ${client}` })
    // The page's limit is 100 a minute on a sliding window counter, whose estimate falls as a window passes: the
    // client is drained once it meets its first 429, and what follows is sent at once.
    let admitted = 0
    while ((await call(url, behindProxy('198.18.7.1'))) === 200 && admitted < 200) admitted++
    expect(admitted).toBeGreaterThanOrEqual(100)
    expect(admitted).toBeLessThan(200)
    // Another client without credentials has a bucket of its own.
    expect(await call(url, behindProxy('198.18.7.2'))).toBe(200)
    // The first, forging a new session cookie, x-real-ip and x-api-key on each request, is still itself: at most
    // the unit its window's estimate may free meanwhile, where each forged value was a fresh bucket.
    const forged: number[] = []
    for (let request = 0; request < 10; request++) {
      const value = `${request}-${Math.random()}`
      forged.push(
        await call(url, {
          cookie: `session=${value}`,
          'x-real-ip': `10.${request}.0.1`,
          'x-api-key': value,
          ...behindProxy('198.18.7.1'),
        }),
      )
    }
    expect(forged.filter((status) => status === 200).length).toBeLessThanOrEqual(1)
    // A session the server signed is its user, wherever it comes from.
    expect(
      await call(url, { cookie: 'session=signed-by-the-server-for-alice', ...behindProxy('198.18.7.1') }),
    ).toBe(200)
  })

  it('its Redis client, built at module load, does not connect when the module is loaded (as by next build)', async () => {
    let connections = 0
    const fakeRedis = createTcpServer((socket) => {
      connections++
      socket.destroy()
    })
    await new Promise<void>((resolve) => fakeRedis.listen(0, '127.0.0.1', resolve))
    closing.push(() => new Promise<void>((resolve) => fakeRedis.close(() => resolve())))
    const port = (fakeRedis.address() as AddressInfo).port
    await docsRouteHandler('build', `redis://127.0.0.1:${port}`)
    // A connection of our own after the module loaded: once the server saw it, it had seen any made before it.
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null })
    probe.on('error', () => {})
    await probe.connect().catch(() => {})
    await until(() => connections > 0, 'the probe connected')
    probe.disconnect()
    expect(connections).toBe(1)
  })
})

describe('addresses a proxy wrote (trustProxy)', () => {
  it('an X-Forwarded-For entry with a port is the address it carries: rotating ports is one client', async () => {
    const server = await startServer('fetch', { limit: 2, window: '1m', trustProxy: 1 })
    closing.push(() => server.close())
    const results: string[] = []
    for (const port of [1001, 1002, 1003]) {
      const { trpc } = server.client({ forwardedFor: `10.9.9.9, 198.18.7.5:${port}` })
      results.push(
        await trpc.hello.query().then(
          () => 'ok',
          (error: { data?: { code?: string } }) => error.data?.code ?? '?',
        ),
      )
    }
    expect(results).toEqual(['ok', 'ok', 'TOO_MANY_REQUESTS'])
    const { trpc } = server.client({ forwardedFor: '[2001:db8:7::5]:443' })
    await trpc.hello.query()
    const refusedIpv6 = await server.client({ forwardedFor: '[2001:db8:7::9]:8443' }).trpc.hello.query()
    expect(refusedIpv6).toEqual({ remaining: 0, limit: 2 })
  })
})

describe('what the procedure is told', () => {
  it("under the failure policy's answer, ctx.rateLimit is undefined: no `remaining: 0` for a quota nobody knows", async () => {
    // A real store that fails: a Redis client whose server is not there, failing each command at once.
    const down = new Redis(1, '127.0.0.1', {
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    })
    down.on('error', () => {})
    const store = new RedisStore({ client: down, readyTimeout: false })
    const server = await startServer('node', {
      limit: 5,
      store,
      onStoreError: 'allow',
      key: () => 'k',
      onError: () => {},
    })
    closing.push(() => server.close())
    expect(await server.client().trpc.hello.query()).toEqual({})
  })

  it('ctx.rateLimit?.settle(0), as docs/trpc.md writes it, compiles under strict TypeScript and gives the call back', async () => {
    const t = initTRPC.context<{ user: string }>().create()
    const limited = t.procedure.use(rateLimit<{ user: string }>({ limit: 1, key: ({ ctx }) => ctx.user }))
    const router = t.router({
      free: limited.query(async ({ ctx }) => {
        await ctx.rateLimit?.settle(0)
        return ctx.rateLimit?.remaining
      }),
    })
    const server = createHTTPServer({ router, createContext: () => ({ user: 'u1' }) })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    closing.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/free`
    const statuses = []
    for (let request = 0; request < 3; request++) statuses.push((await fetch(url)).status)
    expect(statuses).toEqual([200, 200, 200])
  })
})

describe('work estimated low and settled after (ctx.rateLimit.settle)', () => {
  /**
   * The attacker's server, as docs/trpc.md writes it: `search` reserves 1 and settles 50 once its work is done
   * (the work waits at `gate`); limit 100 a minute, `maxDebt` its default (the limit). `options` are added.
   */
  async function searchServer(options: Record<string, unknown> = {}) {
    const seen = { started: 0, refused: 0, work: 0 }
    let open = () => {}
    const gate = new Promise<void>((resolve) => {
      open = resolve
    })
    const t = initTRPC.context<{ req: unknown }>().create()
    // Counts the refusals, before the limiter: an admitted call is counted when its procedure starts.
    const counted = t.procedure.use(async ({ next }) => {
      const result = await next()
      if (!result.ok) seen.refused++
      return result
    })
    const limited = counted.use(rateLimit({ limit: 100, window: '1m', ...options }))
    const router = t.router({
      search: limited.query(async ({ ctx }) => {
        seen.started++
        await gate
        seen.work += 50
        await ctx.rateLimit?.settle(50)
        return 'found'
      }),
      stream: limited.query(async function* () {
        yield 1
        yield 2
      }),
      fail: limited.query(() => {
        throw new Error('the search failed')
      }),
    })
    const server = createHTTPServer({ router, createContext: ({ req }) => ({ req }) })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    closing.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, open }
  }

  it('a batch of 150 calls that each reserved 1 and settled 50 ran 5,000 units against limit 100 + maxDebt 100: at most `concurrency` run at once', async () => {
    const { url, seen, open } = await searchServer()
    const paths = Array.from({ length: 150 }, () => 'search').join(',')
    const answer = fetch(`${url}/${paths}?batch=1`)
    await until(
      () => seen.started + seen.refused === 150,
      () => `every call was refused or started (${seen.started} started, ${seen.refused} refused)`,
    )
    open()
    const results = (await (await answer).json()) as { result?: unknown; error?: { json?: unknown } }[]
    // The bound: limit + maxDebt (its default, the limit) + concurrency (its default, 10) × the underestimate.
    expect(seen.work).toBeLessThanOrEqual(100 + 100 + 10 * (50 - 1))
    expect(results.filter((each) => each.result !== undefined).length).toBe(seen.started)
  })

  it('calls that ran longer than the lease lost their in-flight slots: 20 ran at once against concurrency 10 (the slots are renewed while they run)', async () => {
    const { url, seen, open } = await searchServer({ concurrency: { limit: 2, lease: '1s' } })
    const first = [fetch(`${url}/search`), fetch(`${url}/search`)]
    await until(() => seen.started === 2, 'two calls hold their slots')
    // The lease runs on the server's own clock: real time passes beyond it (a second and a half) while both run.
    const since = Date.now()
    await until(() => Date.now() - since >= 1_500, 'one and a half leases have passed', { within: 5_000 })
    expect((await fetch(`${url}/search`)).status).toBe(429)
    expect(seen.started).toBe(2)
    open()
    expect((await Promise.all(first)).map((answer) => answer.status)).toEqual([200, 200])
  })

  it('a call that threw or streamed kept its in-flight slot: each gives it back once done', async () => {
    const { url } = await searchServer({ concurrency: { limit: 1 } })
    const seen: string[] = []
    for (const path of ['fail', 'stream', 'fail', 'stream']) {
      // httpBatchStreamLink's request: a batch of one, its result streamed as JSON lines.
      const response = await fetch(`${url}/${path}?batch=1`, {
        headers: { 'trpc-accept': 'application/jsonl' },
      })
      const text = await response.text()
      seen.push(text.includes('TOO_MANY_REQUESTS') ? 'refused' : 'ran')
    }
    expect(seen).toEqual(['ran', 'ran', 'ran', 'ran'])
  })
})

describe('Next.js middleware and tRPC on one request', () => {
  it("a refusal of tRPC beside the middleware's RateLimit fields (passed on by @ratewindow/next) is named once", async () => {
    const warnings: { code?: string }[] = []
    const listener = (warning: Error & { code?: string }) => warnings.push(warning)
    process.on('warning', listener)
    closing.push(() => void process.off('warning', listener))
    const server = await startServer('fetch', { limit: 1, window: '1m', key: ({ ctx }) => ctx.user })
    closing.push(() => server.close())
    // What Next.js hands the route after the middleware limiter admitted the request.
    const proxied = {
      'x-ratewindow-proxy':
        '{"RateLimit-Policy":"15;w=60","RateLimit-Limit":"15","RateLimit-Remaining":"14"}',
    }
    for (let request = 0; request < 2; request++)
      await fetch(`${server.url}/hello`, { headers: { 'x-user': 'u2', ...proxied } })
    await until(() => warnings.some((warning) => warning.code === 'RATEWINDOW_MIXED_HEADERS'), 'the warning')
  })
})
