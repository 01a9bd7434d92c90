/**
 * `@ratewindow/next` in process, against Next's own `NextRequest`: the client address from X-Forwarded-For as far
 * as `trustProxy` trusts it, the coded errors at construction, the options refused outside route handlers, and
 * what each entry point answers. A real app built with `next build` and served by `next start` is in
 * test/runtimes/next.test.ts.
 */
import { MemoryStore } from '@ratewindow/core'
import { rateLimit, rateLimitAction, rateLimitOf, withRateLimit } from '@ratewindow/next'
import { NextRequest } from 'next/server'
import { describe, expect, it } from 'vitest'

const URL = 'http://localhost/api/hello'
const from = (forwardedFor?: string) =>
  new NextRequest(URL, { headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } })

describe('@ratewindow/next', () => {
  it('refuses to guess the client address: trustProxy, clientIp or key is required, and the error says how', () => {
    for (const make of [
      () => rateLimit({ limit: 1 }),
      () => withRateLimit(() => new Response()),
      () => rateLimitAction(),
    ])
      expect(make).toThrow(
        expect.objectContaining({
          code: 'ERR_RATEWINDOW_INVALID_OPTION',
          option: 'trustProxy',
          message: expect.stringMatching(/`trustProxy: 1` on Vercel.*`clientIp\(request\)`.*`key`/),
        }),
      )
    expect(() => rateLimit({ key: () => 'k' })).not.toThrow()
    expect(() => rateLimit({ clientIp: () => '203.0.113.1' })).not.toThrow()
    expect(() => rateLimit({ trustProxy: 1, clientIp: () => 'x' })).toThrow(/`trustProxy` or `clientIp`/)
    expect(() => rateLimit({ trustProxy: 0 })).toThrow(/`trustProxy`.*received 0/)
    expect(() => rateLimit({ trustProxy: [] })).toThrow(expect.objectContaining({ option: 'trustProxy' }))
    expect(() => rateLimit({ trustProxy: 'not-an-address' })).toThrow(
      expect.objectContaining({ option: 'trustProxy' }),
    )
    expect(() => rateLimit({ trustProxy: '0.0.0.0/0' })).toThrow(/any client could then choose its own key/)
  })

  it('refuses the options that need the response in middleware and server actions, pointing at withRateLimit', () => {
    const response = {
      skipFailedRequests: true,
      skipSuccessfulRequests: true,
      concurrency: { limit: 1 },
      delay: {},
    } as const
    for (const [name, value] of Object.entries(response)) {
      const options = { trustProxy: 1, algorithm: 'gcra', [name]: value } as const
      for (const make of [() => rateLimit(options as never), () => rateLimitAction(options as never)])
        expect(make).toThrow(
          expect.objectContaining({
            code: 'ERR_RATEWINDOW_INVALID_OPTION',
            option: name,
            message: expect.stringContaining('`withRateLimit(handler, options)`'),
          }),
        )
      expect(() => withRateLimit(() => new Response(), options)).not.toThrow()
    }
  })

  it('keys a client by the X-Forwarded-For entry trustProxy points at, never by what the client wrote before it', async () => {
    const one = rateLimit({ limit: 1, trustProxy: 1 })
    expect((await one(from('6.6.6.6, 203.0.113.1'))).status).toBe(200)
    // The client chose another left entry: the proxy's entry (the rightmost) is still the same client.
    expect((await one(from('7.7.7.7, 203.0.113.1'))).status).toBe(429)
    expect((await one(from('203.0.113.2'))).status).toBe(200)
    const two = rateLimit({ limit: 1, trustProxy: 2 })
    expect((await two(from('203.0.113.1, 10.0.0.1'))).status).toBe(200)
    expect((await two(from('203.0.113.1, 10.0.0.2'))).status).toBe(429)
    const networks = rateLimit({ limit: 1, trustProxy: ['10.0.0.0/8'] })
    expect((await networks(from('203.0.113.1, 10.0.0.1, 10.1.1.1'))).status).toBe(200)
    expect((await networks(from('6.6.6.6, 203.0.113.1, 10.0.0.9'))).status).toBe(429)
  })

  it('middleware: goes on with the RateLimit headers, then answers 429 with them, Retry-After and the body', async () => {
    const middleware = rateLimit({ limit: 2, window: '1m', trustProxy: 1, store: new MemoryStore() })
    const passed = await middleware(from('203.0.113.1'))
    expect(passed.headers.get('x-middleware-next')).toBe('1')
    expect(passed.headers.get('ratelimit-remaining')).toBe('1')
    await middleware(from('203.0.113.1'))
    const refused = await middleware(from('203.0.113.1'))
    expect(refused.status).toBe(429)
    expect(refused.headers.get('x-middleware-next')).toBeNull()
    expect(refused.headers.get('ratelimit-remaining')).toBe('0')
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(await refused.text()).toMatch(/Too many requests/i)
  })

  it('withRateLimit: the handler reads its decision, its response gets the headers, refused calls never run it', async () => {
    let runs = 0
    const GET = withRateLimit(
      (request: Request) => {
        runs++
        return Response.json({ remaining: rateLimitOf(request)?.remaining })
      },
      { limit: 1, trustProxy: 1 },
    )
    const first = await GET(from('203.0.113.1'), undefined)
    expect(await first.json()).toEqual({ remaining: 0 })
    expect(first.headers.get('ratelimit-limit')).toBe('1')
    expect((await GET(from('203.0.113.1'), undefined)).status).toBe(429)
    expect(runs).toBe(1)
  })

  it('withRateLimit: skipFailedRequests gives back a call whose response failed', async () => {
    const POST = withRateLimit(() => new Response('no', { status: 500 }), {
      limit: 1,
      trustProxy: 1,
      skipFailedRequests: true,
    })
    for (let call = 0; call < 3; call++) expect((await POST(from('203.0.113.1'), undefined)).status).toBe(500)
  })

  it('withRateLimit: a response with immutable headers (Response.redirect) still gets the RateLimit headers', async () => {
    const GET = withRateLimit(() => Response.redirect('http://localhost/elsewhere', 302), { trustProxy: 1 })
    expect((await GET(from('203.0.113.1'), undefined)).headers.get('ratelimit-limit')).toBe('100')
  })

  it('rateLimitAction: returns the decision, with Retry-After in seconds once refused', async () => {
    const limit = rateLimitAction({ limit: 1, window: '1m', trustProxy: 1 })
    const headers = new Headers({ 'x-forwarded-for': '203.0.113.1' })
    expect(await limit(headers)).toMatchObject({ allowed: true, retryAfter: 0, result: { remaining: 0 } })
    const refused = await limit(headers)
    expect(refused).toMatchObject({ allowed: false, result: { allowed: false } })
    expect(refused.retryAfter).toBeGreaterThan(0)
    expect(refused.headers['Retry-After']).toBe(String(refused.retryAfter))
  })

  it('a key that answers undefined keys the request by its client address, never by one shared key', async () => {
    const verified = new Map([['signed-token', 'alice']])
    const middleware = rateLimit({
      limit: 1,
      trustProxy: 1,
      key: async (request) => {
        const user = verified.get(request.headers.get('authorization') ?? '')
        return user && `user:${user}`
      },
    })
    const asUser = (client: string) =>
      new NextRequest(URL, { headers: { 'x-forwarded-for': client, authorization: 'signed-token' } })
    expect((await middleware(from('203.0.113.1'))).status).toBe(200)
    expect((await middleware(from('203.0.113.1'))).status).toBe(429)
    // Another anonymous client is another bucket; the verified user is its own, from any address.
    expect((await middleware(from('203.0.113.2'))).status).toBe(200)
    expect((await middleware(asUser('203.0.113.1'))).status).toBe(200)
    expect((await middleware(asUser('203.0.113.3'))).status).toBe(429)
    // Without an address to fall back on, undefined is a coded error.
    const unkeyed = withRateLimit(() => new Response(), { key: () => undefined })
    await expect(unkeyed(from('203.0.113.1'), undefined)).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_KEY',
      message: expect.stringContaining('`trustProxy`'),
    })
  })
})
