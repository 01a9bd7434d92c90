/**
 * What only the Hono adapter has: the client address from the runtime's `getConnInfo` or a `clientIp` function,
 * `trustProxy` by hop count or by network, `c.get('rateLimit')` typed through Hono's Variables, a handler that
 * returns its response, headers kept on a `Response` the handler built itself, and work after the response handed
 * to `executionCtx.waitUntil`. The shared behaviour, composition and policy cases run on Hono in harness.ts.
 */
import { getConnInfo } from '@hono/node-server/conninfo'
import { MemoryStore } from '@ratewindow/core'
import { type RateLimitEnv, type RateLimitResult, rateLimit } from '@ratewindow/hono'
import { Hono } from 'hono'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { honoErrorsAsJson } from '../support/hono-app.js'
import { appPerTest, serveHono } from './harness.js'

const { start } = appPerTest((hono: Hono<RateLimitEnv>) => {
  hono.onError(honoErrorsAsJson)
  return serveHono(hono)
})

describe('@ratewindow/hono', () => {
  it('refuses to guess the client address: getConnInfo, clientIp or key is required, named in the error', () => {
    expect(() => rateLimit({ limit: 1 })).toThrow(
      expect.objectContaining({
        code: 'ERR_RATEWINDOW_INVALID_OPTION',
        option: 'getConnInfo',
        message: expect.stringMatching(/`getConnInfo`.*`clientIp\(c\)`.*`key`/),
      }),
    )
    expect(() => rateLimit({ limit: 1, key: () => 'k' })).not.toThrow()
    expect(() => rateLimit({ limit: 1, clientIp: () => '203.0.113.1' })).not.toThrow()
    expect(() => rateLimit({ getConnInfo, clientIp: () => 'x' })).toThrow(/`getConnInfo` or `clientIp`/)
    expect(() => rateLimit({ trustProxy: 1 })).toThrow(expect.objectContaining({ option: 'trustProxy' }))
    expect(() => rateLimit({ getConnInfo, trustProxy: 0 })).toThrow(/`trustProxy`.*received 0/)
    expect(() => rateLimit({ getConnInfo, trustProxy: [] })).toThrow(
      expect.objectContaining({ option: 'trustProxy' }),
    )
    expect(() => rateLimit({ getConnInfo, trustProxy: 'not-an-address' })).toThrow(
      expect.objectContaining({ option: 'trustProxy' }),
    )
    expect(() => rateLimit({ getConnInfo, getConnInfo2: 1 } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION' }),
    )
  })

  it('keys by the socket address, and walks X-Forwarded-For back through `trustProxy` hops only', async () => {
    const keys: (string | undefined)[] = []
    const hono = new Hono<RateLimitEnv>()
    hono.get('/none', rateLimit({ getConnInfo, limit: 100 }), (c) => c.text(c.get('rateLimit')!.key))
    hono.get('/one', rateLimit({ getConnInfo, limit: 100, trustProxy: 1 }), (c) =>
      c.text(c.get('rateLimit')!.key),
    )
    hono.get('/two', rateLimit({ getConnInfo, limit: 100, trustProxy: 2 }), (c) =>
      c.text(c.get('rateLimit')!.key),
    )
    hono.get('/nets', rateLimit({ getConnInfo, limit: 100, trustProxy: ['127.0.0.1', '10.0.0.0/8'] }), (c) =>
      c.text(c.get('rateLimit')!.key),
    )
    const url = await start(hono)
    const chain = '198.51.100.1, 203.0.113.9, 10.1.2.3'
    for (const path of ['/none', '/one', '/two', '/nets']) {
      keys.push((await request(url).get(path).set('X-Forwarded-For', chain).expect(200)).text)
    }
    expect(keys).toEqual(['127.0.0.1', '10.1.2.3', '203.0.113.9', '203.0.113.9'])
    // Fewer hops than trusted: the leftmost; no header: the socket.
    expect((await request(url).get('/two').set('X-Forwarded-For', '203.0.113.7').expect(200)).text).toBe(
      '203.0.113.7',
    )
    expect((await request(url).get('/nets').expect(200)).text).toBe('127.0.0.1')
  })

  it('types the result through Variables, calls `handler` for its response, and keeps headers on a Response the handler built', async () => {
    const seen: RateLimitResult[] = []
    const hono = new Hono<RateLimitEnv>()
    const limiter = rateLimit({
      clientIp: () => '203.0.113.5',
      limit: 1,
      handler: (c, result) => c.json({ custom: true, retryAfter: result.retryAfter }, 429),
    })
    hono.get('/own', limiter, () => new Response('built by hand'))
    hono.get('/typed', rateLimit({ clientIp: () => '203.0.113.6', limit: 2 }), (c) => {
      const result: RateLimitResult | undefined = c.get('rateLimit')
      if (result) seen.push(result)
      return c.text('typed')
    })
    const url = await start(hono)
    const own = await request(url).get('/own').expect(200, 'built by hand')
    expect(own.headers['ratelimit-limit']).toBe('1')
    expect(own.headers['ratelimit-remaining']).toBe('0')
    const denied = await request(url).get('/own').expect(429)
    expect(denied.body).toEqual({ custom: true, retryAfter: expect.any(Number) })
    expect(denied.headers['retry-after']).toBeDefined()
    await request(url).get('/typed').expect(200, 'typed')
    expect(seen[0]).toMatchObject({ allowed: true, key: '203.0.113.6', remaining: 1 })
  })

  // Issue 32: Hono's own test style, `app.request()`, has no connection: `getConnInfo` from @hono/node-server throws
  // on the missing bindings. Every such request shared one key, `::`, with a warning (a runtime's helper used on
  // another runtime would key every client so): it is a coded error now that names the fixes, and `::` an opt-in.
  it("app.request() with @hono/node-server's getConnInfo and no key: ERR_RATEWINDOW_NO_CONNECTION_INFO naming the fixes, not one key shared by every request", async () => {
    const errors: (Error & { code?: string; option?: string })[] = []
    const app = new Hono<RateLimitEnv>()
    app.onError((error, c) => {
      errors.push(error)
      return honoErrorsAsJson(error, c)
    })
    app.use(rateLimit({ limit: 2, window: '1m', getConnInfo }))
    app.get('/', (c) => c.text(c.get('rateLimit')!.key))
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await app.request('/')).status)
    expect(statuses).toEqual([500, 500, 500])
    expect(errors.map((error) => [error.code, error.option])).toEqual(
      Array(3).fill(['ERR_RATEWINDOW_NO_CONNECTION_INFO', 'getConnInfo']),
    )
    expect(errors[0]!.message).toMatch(
      /`key`.*`clientIp`.*`getConnInfo` of the runtime.*`allowNoConnection: true`/s,
    )
    expect(errors[0]!.cause).toBeInstanceOf(Error)
  })

  it('app.request() with a `key` function needs no connection: each test client its own key', async () => {
    const app = new Hono<RateLimitEnv>()
    app.use(
      rateLimit({ limit: 1, window: '1m', getConnInfo, key: (c) => c.req.header('x-user') ?? 'anonymous' }),
    )
    app.get('/', (c) => c.text(c.get('rateLimit')!.key))
    const as = (user: string) => app.request('/', { headers: { 'x-user': user } })
    expect([(await as('ada')).status, (await as('ada')).status, (await as('grace')).status]).toEqual([
      200, 429, 200,
    ])
  })

  it('`allowNoConnection: true` keys app.request() as one client, `::`, with one warning (the behaviour before)', async () => {
    const warnings: (Error & { code?: string })[] = []
    const listener = (warning: Error) => warnings.push(warning)
    process.on('warning', listener)
    try {
      const app = new Hono<RateLimitEnv>()
      app.use(rateLimit({ limit: 2, window: '1m', getConnInfo, trustProxy: 1, allowNoConnection: true }))
      app.get('/', (c) => c.text(c.get('rateLimit')!.key))
      const first = await app.request('/')
      expect([first.status, await first.text()]).toEqual([200, '::'])
      expect((await app.request('/')).status).toBe(200)
      const refused = await app.request('/')
      expect(refused.status).toBe(429)
      expect(refused.headers.get('retry-after')).not.toBeNull()
      // Behind `trustProxy`, a test chooses its client as a proxy would.
      const forwarded = await app.request('/', { headers: { 'X-Forwarded-For': '203.0.113.7' } })
      expect([forwarded.status, await forwarded.text()]).toEqual([200, '203.0.113.7'])
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', listener)
    }
    const ours = warnings.filter((warning) => warning.code === 'RATEWINDOW_NO_CONNECTION_INFO')
    expect(ours).toHaveLength(1) // once per process (this file's modules)
    expect(ours[0]!.message).toMatch(/app\.request\(\).*`allowNoConnection`/)
  })

  it('`allowNoConnection` is checked at construction: a boolean, and only with `getConnInfo`', () => {
    expect(() => rateLimit({ getConnInfo, allowNoConnection: 'yes' as never })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'allowNoConnection' }),
    )
    expect(() => rateLimit({ clientIp: (c) => c.req.header('x-client'), allowNoConnection: true })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'allowNoConnection' }),
    )
  })

  it('resets a key through the handle', async () => {
    const limiter = rateLimit({ clientIp: (c) => c.req.header('x-client'), limit: 1 })
    const hono = new Hono<RateLimitEnv>()
    hono.get('/', limiter, (c) => c.text('ok'))
    hono.post('/reset-me', async (c) => {
      await limiter.reset(c)
      return c.text('reset')
    })
    const url = await start(hono)
    await request(url).get('/').set('x-client', '203.0.113.1').expect(200)
    await request(url).get('/').set('x-client', '203.0.113.1').expect(429)
    await request(url).post('/reset-me').set('x-client', '203.0.113.1').expect(200)
    await request(url).get('/').set('x-client', '203.0.113.1').expect(200)
    await limiter.resetKey('203.0.113.1')
    await request(url).get('/').set('x-client', '203.0.113.1').expect(200)
  })

  it('hands refunds and slot releases after the response to executionCtx.waitUntil where the runtime has one', async () => {
    const deferred: Promise<unknown>[] = []
    const executionCtx = {
      waitUntil: (work: Promise<unknown>) => void deferred.push(work),
      passThroughOnException: () => {},
      props: {},
    }
    const hono = new Hono<RateLimitEnv>()
    hono.use(
      rateLimit({
        clientIp: () => '203.0.113.8',
        limit: 2,
        skipFailedRequests: true,
        concurrency: { limit: 1 },
        store: new MemoryStore(),
      }),
    )
    hono.get('/fail', (c) => c.text('failed', 500))
    hono.get('/', (c) => c.text('ok'))
    const fetch = (path: string) => hono.fetch(new Request(`http://test${path}`), {}, executionCtx)
    // Each body is read, as the runtime sends it: a slot is held until its response's body is sent.
    for (let i = 0; i < 3; i++) {
      const response = await fetch('/fail')
      expect([response.status, await response.text()]).toEqual([500, 'failed'])
    }
    // Each failed request: its refund and its slot's release, both through waitUntil.
    expect(deferred).toHaveLength(6)
    await Promise.all(deferred)
    for (let i = 0; i < 2; i++) expect(await (await fetch('/')).text()).toBe('ok')
    expect((await fetch('/')).status).toBe(429)
    // Without an execution context (Node, Bun, Deno) the work runs on its own.
    const plain = await hono.fetch(new Request('http://test/fail'))
    expect(plain.status).toBe(429)
  })
})
