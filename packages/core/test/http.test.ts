import { EventEmitter } from 'node:events'
import { describe, expect, it, vi } from 'vitest'
import {
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  middlewareOptionNames,
  rateLimiterOptionsFrom,
  type TrackedResponse,
} from '../src/entries/adapter.js'
import { rejectUnknownOptions } from '../src/entries/support.js'
import { HTTP_DEFAULTS, type HttpRateLimitOptions, MemoryStore, RateLimiter } from '../src/index.js'

interface Req {
  ip: string
  user?: string
}
const binding: FrameworkBinding<Req> = {
  name: 'Test',
  clientIp: (request) => request.ip,
  untrustedForwardedFor: () => false,
  trustProxyHint: '',
  options: ['handler'],
}

/** A response the test finishes or closes by hand. */
class Response extends EventEmitter implements TrackedResponse {
  statusCode = 200
  writableFinished = false
  finish(status: number) {
    this.statusCode = status
    this.writableFinished = true
    this.emit('finish')
    this.emit('close')
  }
  disconnect() {
    this.emit('close')
  }
}

const flush = () => new Promise((resolve) => setImmediate(resolve))

describe('HttpRateLimiter options', () => {
  it('fills every default from HTTP_DEFAULTS', async () => {
    const engine = new HttpRateLimiter<Req>({}, binding)
    const decision = await engine.decide({ ip: '192.0.2.1' })
    expect(decision?.result.limit).toBe(HTTP_DEFAULTS.limit)
    expect(decision?.result.rule.algorithm).toBe(HTTP_DEFAULTS.algorithm)
    expect(decision?.result.rule.windowMs).toBe(60_000)
    expect(decision?.headers['RateLimit-Policy']).toBe('100;w=60')
  })

  it.each([
    [
      { max: 2, windowMs: 60_000 },
      'max',
      "express-rate-limit, @fastify/rate-limit and koa-ratelimit's name",
      '`limit: 100`',
    ],
    [{ windowMs: 60_000 }, 'windowMs', "express-rate-limit's name", "'15 minutes'"],
    [{ timeWindow: '1 minute' }, 'timeWindow', "@fastify/rate-limit's name", '`window`'],
    [{ duration: 60_000 }, 'duration', "koa-ratelimit's name", '`window`'],
    [{ keyGenerator: () => 'k' }, 'keyGenerator', 'express-rate-limit and @fastify/rate-limit', '`key'],
    [{ id: () => 'k' }, 'id', 'koa-ratelimit', '`key'],
    [{ standardHeaders: true }, 'standardHeaders', 'express-rate-limit', "`headers: 'draft-6'"],
    [{ blacklist: [] }, 'blacklist', 'koa-ratelimit', '`denyList'],
    [{ whitelist: () => true }, 'whitelist', 'koa-ratelimit', '`allowList'],
    [{ errorResponseBuilder: () => ({}) }, 'errorResponseBuilder', '@fastify/rate-limit', '`message'],
    [{ db: new Map() }, 'db', 'koa-ratelimit', '`store'],
    [{ groupId: 'x' }, 'groupId', '@fastify/rate-limit', '`group'],
    [{ skipOnError: true }, 'skipOnError', '@fastify/rate-limit', '`onStoreError'],
    [{ delayAfter: 5 }, 'delayAfter', "express-slow-down's name", '`slowDown({ delayAfter, delayMs'],
    [{ delayMs: 100 }, 'delayMs', "express-slow-down's name", '`delay: { max }` on `rateLimit()`'],
    [{ maxDelayMs: 2000 }, 'maxDelayMs', "express-slow-down's name", 'refusing none for its count'],
    [{ global: false }, 'global', '@ratewindow/fastify', 'only'],
    [{ trustProxy: 1 }, 'trustProxy', '@ratewindow/hono', "app.set('trust proxy', 1)"],
    [{ getConnInfo: () => ({ remote: {} }) }, 'getConnInfo', '@ratewindow/hono', '`req.ip`'],
    [{ clientIp: () => '192.0.2.1' }, 'clientIp', '@ratewindow/hono', '`ctx.ip`'],
    [{ lmit: 5 }, 'lmit', 'Did you mean `limit`?', 'Known options: store'],
  ])('refuses %j naming the option and what to use', (options, option, origin, use) => {
    const build = () => new HttpRateLimiter<Req>(options as never, binding)
    expect(build).toThrow(expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option }))
    expect(build).toThrow(origin)
    expect(build).toThrow(use)
  })

  it.each([
    [{ allowList: ['127.0.0.1'] }, 'allowList', '{ ips: [...] }'],
    [{ allowList: () => true }, 'allowList', '`skip'],
    [{ denyList: { ips: ['10.0.0.0/33'] } }, 'denyList', 'prefix length'],
    [{ denyList: { ips: ['nope'] } }, 'denyList', 'nope'],
    [{ denyStatusCode: 200 }, 'denyStatusCode', '400 to 599'],
  ])('refuses a bad list option %j, naming it', (options, option, text) => {
    const build = () => new HttpRateLimiter<Req>(options as never, binding)
    expect(build).toThrow(expect.objectContaining({ option }))
    expect(build).toThrow(text)
  })

  it("accepts the adapter's own names, and names the options object in messages", () => {
    expect(() => new HttpRateLimiter<Req>({ handler: () => {} } as never, binding)).not.toThrow()
    expect(
      () => new HttpRateLimiter<Req>({ max: 1 } as never, binding, { where: 'config.ratewindow of GET /x' }),
    ).toThrow('in config.ratewindow of GET /x options')
  })

  it('says which names collide when `rules` comes with `limit` or `window`', () => {
    expect(() => new HttpRateLimiter<Req>({ rules: [], limit: 1, window: '1m' } as never, binding)).toThrow(
      /received `rules` and `limit`, `window`/,
    )
  })

  it('explains custom header names as koa-ratelimit', () => {
    expect(() => new HttpRateLimiter<Req>({ headers: { remaining: 'X-Left' } } as never, binding)).toThrow(
      /koa-ratelimit/,
    )
  })

  it('gives a `limit` function one namespace for all its limits, apart from fixed limits', () => {
    const store = new MemoryStore()
    const dynamic = new HttpRateLimiter<Req>({ limit: (request) => (request.user ? 10 : 2), store }, binding)
    const fixed = new HttpRateLimiter<Req>({ limit: 2, store }, binding)
    expect(dynamic.namespace).toBe('rw:swc60000x*:')
    expect(fixed.namespace).toBe('rw:swc60000x2:')
  })

  it('scopes an engine (a Fastify route) so it never meets another with the same rules', () => {
    const store = new MemoryStore()
    const a = new HttpRateLimiter<Req>({ limit: 5, store }, binding, { scope: 'GET /a' })
    const b = new HttpRateLimiter<Req>({ limit: 5, store }, binding, { scope: 'GET /b' })
    expect(a.namespace).not.toBe(b.namespace)
    // The same route again (an app rebuilt): it takes the route's counters over.
    const again = new HttpRateLimiter<Req>({ limit: 5, store }, binding, { scope: 'GET /a' })
    expect(again.namespace).toBe(a.namespace)
  })
})

describe('HttpRateLimiter refunds', () => {
  const setup = async (options: object) => {
    const engine = new HttpRateLimiter<Req>({ limit: 1, ...options }, binding)
    const decision = (await engine.decide({ ip: '192.0.2.9' }))!
    const response = new Response()
    engine.track(response, decision)
    return { engine, response, next: async () => (await engine.decide({ ip: '192.0.2.9' }))!.result.allowed }
  }

  it('refunds a failed response that was sent, with skipFailedRequests', async () => {
    const { response, next } = await setup({ skipFailedRequests: true })
    response.finish(500)
    await flush()
    expect(await next()).toBe(true)
  })

  it('does not refund a client that disconnected before its response was sent', async () => {
    const { response, next } = await setup({ skipFailedRequests: true })
    response.disconnect()
    response.finish(500) // too late: the verdict was taken at the first event
    await flush()
    expect(await next()).toBe(false)
  })

  it('refunds a successful response with skipSuccessfulRequests, not a failed one', async () => {
    const ok = await setup({ skipSuccessfulRequests: true })
    ok.response.finish(204)
    await flush()
    expect(await ok.next()).toBe(true)
    const failed = await setup({ skipSuccessfulRequests: true })
    failed.response.finish(503)
    await flush()
    expect(await failed.next()).toBe(false)
  })

  it('counts the request and reports to onError when requestWasSuccessful throws', async () => {
    const onError = vi.fn()
    const { response, next } = await setup({
      skipFailedRequests: true,
      onError,
      requestWasSuccessful: () => {
        throw new Error('bad callback')
      },
    })
    response.finish(500)
    await flush()
    expect(await next()).toBe(false)
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ message: 'bad callback' }), {
      operation: 'refund',
      key: '192.0.2.9',
    })
  })
})

describe('HttpRateLimiter.decideNow: no promise where nothing is asynchronous', () => {
  const store = () => new MemoryStore()

  it('decides synchronously on the memory store with synchronous callbacks, and counts like decide', async () => {
    const engine = new HttpRateLimiter<Req>(
      { limit: 2, store: store(), key: (request) => request.user ?? request.ip, skip: () => false },
      binding,
    )
    const first = engine.decideNow({ ip: '192.0.2.1', user: 'ann' })
    expect(first).not.toBeInstanceOf(Promise)
    expect((first as HttpDecision).result.remaining).toBe(1)
    // `decide` is the same decision behind a promise, on the same counter.
    const second = engine.decide({ ip: '192.0.2.2', user: 'ann' })
    expect(second).toBeInstanceOf(Promise)
    expect((await second)?.result.remaining).toBe(0)
    const third = engine.decideNow({ ip: '192.0.2.1', user: 'ann' }) as HttpDecision
    expect(third.result.allowed).toBe(false)
    expect(Number(third.headers['Retry-After'])).toBeGreaterThan(0)
    // A refused request was charged nothing: its settle charges nothing either.
    await expect(third.result.settle!(5)).resolves.toEqual({ charged: 0, refunded: 0, uncharged: 4 })
  })

  it('gives a promise once a callback answers with one, with the same result', async () => {
    const engine = new HttpRateLimiter<Req>(
      { limit: 2, store: store(), key: async (request) => request.ip, cost: 2 },
      binding,
    )
    const pending = engine.decideNow({ ip: '192.0.2.1' })
    expect(pending).toBeInstanceOf(Promise)
    expect((await pending)?.result).toMatchObject({ allowed: true, remaining: 0, cost: 2 })
    const skipped = new HttpRateLimiter<Req>({ store: store(), skip: async () => true }, binding)
    expect(await skipped.decideNow({ ip: '192.0.2.1' })).toBeUndefined()
  })

  it('rejects (never throws) when a callback throws or returns a bad value', async () => {
    const throwing = new HttpRateLimiter<Req>(
      {
        store: store(),
        key: () => {
          throw new Error('key failed')
        },
      },
      binding,
    )
    const pending = throwing.decideNow({ ip: '192.0.2.1' })
    expect(pending).toBeInstanceOf(Promise)
    await expect(pending).rejects.toThrow('key failed')
    const badKey = new HttpRateLimiter<Req>({ store: store(), key: () => 42 as unknown as string }, binding)
    await expect(badKey.decideNow({ ip: '192.0.2.1' })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_KEY',
    })
  })

  it('puts settle on an admitted result without making it part of the data', async () => {
    const engine = new HttpRateLimiter<Req>({ limit: 10, store: store() }, binding)
    const { result } = engine.decideNow({ ip: '192.0.2.1' }) as HttpDecision
    expect(typeof result.settle).toBe('function')
    expect(Object.keys(result)).not.toContain('settle')
    expect(JSON.parse(JSON.stringify(result))).not.toHaveProperty('settle')
    expect(await result.settle!(4)).toEqual({ charged: 3, refunded: 0, uncharged: 0 })
    expect(result.cost).toBe(4)
    expect((engine.decideNow({ ip: '192.0.2.1' }) as HttpDecision).result.remaining).toBe(5)
  })
})

describe('rateLimiterOptionsFrom: HTTP options as a RateLimiter (messages outside HTTP)', () => {
  it('limit, window and algorithm make the rule, with the limiter options kept', async () => {
    const store = new MemoryStore()
    const options = rateLimiterOptionsFrom({
      limit: 2,
      window: '1m',
      algorithm: 'fixed-window',
      store,
      prefix: 'm',
    })
    expect(options).toMatchObject({ store, prefix: 'm' })
    const limiter = new RateLimiter(options)
    const allowed = [await limiter.limit('k'), await limiter.limit('k'), await limiter.limit('k')]
    expect(allowed.map((result) => result.allowed)).toEqual([true, true, false])
  })

  it('refuses a limit that needs a request, naming the option', () => {
    expect(() => rateLimiterOptionsFrom({ limit: () => 3 }, '@RateLimit() of Chat.send')).toThrow(/`limit`/)
    expect(() => rateLimiterOptionsFrom({ windowMs: 1000 } as never)).toThrow(/windowMs/)
  })
})

describe('middlewareOptionNames: the names of options built on the middleware options', () => {
  interface CallOptions extends Omit<HttpRateLimitOptions<Req>, 'statusCode' | 'message' | 'delay'> {
    clientIp?: (request: Req) => string | undefined
  }
  const names = middlewareOptionNames<CallOptions>(
    { statusCode: true, message: true, delay: true },
    { clientIp: true },
  )

  it('are every middleware option but the refused ones, then the own ones', () => {
    expect(names).toContain('limit')
    expect(names).toContain('overrides')
    expect(names).not.toContain('statusCode')
    expect(names).not.toContain('delay')
    expect(names.at(-1)).toBe('clientIp')
  })

  it('refuse a refused name as unknown, and accept an own one', () => {
    expect(() => rejectUnknownOptions({ message: 'no' }, names, 'call()')).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option: 'message' }),
    )
    expect(() => rejectUnknownOptions({ clientIp: () => '::1', limit: 5 }, names, 'call()')).not.toThrow()
  })
})
