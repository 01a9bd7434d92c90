/**
 * Issue 24: `slowDown()` over HTTP in every adapter and framework version, on memory, Redis and the Redis
 * Cluster. Time is driven: the stores count on one manual clock, the delays run on manual timers (their own
 * clock), so a delayed request answers when the test advances the timers, and `waited` is the delay it was
 * armed with.
 */
import { type DecisionOutcome, MemoryStore, RedisStore, type Store } from '@ratewindow/core'
import { slowDown as expressSlowDown } from '@ratewindow/express'
import { slowDown as honoSlowDown } from '@ratewindow/hono'
import express5 from 'express'
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { clusterClient, standaloneClient } from '../support/redis.js'
import { ManualTimers } from '../support/timers.js'
import { headerOf, listening } from './harness.js'
import {
  type Answered,
  type Call,
  type CommonSlowDownOptions,
  call,
  SLOW_FRAMEWORKS,
  type SlowApp,
} from './slow-down-harness.js'

let prefixes = 0
/** Each kind of store; `twin` is another process's store on the same counters (none for memory). */
const STORES: [string, (clock: ManualClock) => { store: Store; twin?: () => Store }][] = [
  ['memory store', (clock) => ({ store: new MemoryStore({ clock: clock.read }) })],
  [
    'Redis store',
    (clock) => {
      const prefix = `slow${process.pid}x${prefixes++}:`
      const make = () => new RedisStore({ client: standaloneClient(), clock: clock.read, prefix })
      return { store: make(), twin: make }
    },
  ],
  [
    'Redis Cluster store',
    (clock) => {
      const prefix = `slow${process.pid}x${prefixes++}:`
      const make = () => new RedisStore({ client: clusterClient(), clock: clock.read, prefix })
      return { store: make(), twin: make }
    },
  ],
]

const apps: SlowApp[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

describe.each(SLOW_FRAMEWORKS)('$name', (framework) => {
  describe.each(STORES)('on the %s', (storeName, makeStores) => {
    const setup = async (options: CommonSlowDownOptions) => {
      const clock = new ManualClock(1_800_000_000_000)
      const timers = new ManualTimers(new ManualClock())
      const stores = makeStores(clock)
      const start = (store: Store) => framework.start({ store, timers, ...options })
      const app = await start(stores.store)
      apps.push(app)
      const twin = stores.twin
      return {
        app,
        clock,
        timers,
        twin: twin && (async () => apps[apps.push(await start(twin())) - 1]!),
      }
    }

    it('delays each request after delayAfter by delayMs(used), at most maxDelayMs, and never refuses', async () => {
      const { app, timers } = await setup({
        windowMs: 60_000,
        delayAfter: 2,
        delayMs: (used: number) => (used - 2) * 100,
        maxDelayMs: 250,
      })
      const calls: Call[] = []
      for (let i = 0; i < 6; i++) calls.push(await call(app, timers))
      expect(calls.map((each) => each.status)).toEqual([200, 200, 200, 200, 200, 200])
      expect(calls.map((each) => each.waited)).toEqual([0, 0, 100, 200, 250, 250])
      expect(calls.map((each) => each.info?.delay)).toEqual([0, 0, 100, 200, 250, 250])
      expect(calls.map((each) => each.info?.used)).toEqual([1, 2, 3, 4, 5, 6])
      expect(calls.map((each) => each.info?.remaining)).toEqual([1, 0, 0, 0, 0, 0])
      expect(calls[5]!.info).toMatchObject({ limit: 2, key: '127.0.0.1' })
      // The fixed window ends on a minute boundary of the store's clock (1_800_000_000_000 is one).
      expect(new Date(calls[5]!.info!.resetTime!).getTime()).toBe(1_800_000_060_000)
    })

    it('counts in windows of windowMs: the next window starts at full speed', async () => {
      const { app, clock, timers } = await setup({ windowMs: 60_000, delayAfter: 1, delayMs: 500 })
      expect((await call(app, timers)).waited).toBe(0)
      expect((await call(app, timers)).waited).toBe(500)
      clock.advance(60_000)
      const next = await call(app, timers)
      expect([next.waited, next.info?.used]).toEqual([0, 1])
    })

    // A memory store counts for one process: only the Redis stores share a count (registered for them alone).
    if (storeName !== 'memory store') {
      it('shares the count through the store: a second process on the same counters delays at once', async () => {
        const { app, timers, twin } = await setup({ delayAfter: 2, delayMs: 300 })
        if (twin === undefined) throw new Error('a Redis store has a twin')
        const other = await twin()
        await call(app, timers)
        await call(app, timers)
        const third = await call(other, timers)
        expect([third.info?.used, third.waited]).toEqual([3, 300])
      })
    }

    it('drops a client that disconnects while delayed: its timer is cleared and the handler never runs', async () => {
      const { app, timers } = await setup({ delayAfter: 0, delayMs: 5_000 })
      const aborter = new AbortController()
      const response = fetch(`${app.url}/`, { signal: aborter.signal }).catch((error: unknown) => error)
      expect(await timers.armed()).toBe(5_000)
      const cleared = timers.cleared()
      aborter.abort()
      await cleared
      expect(await response).toBeInstanceOf(Error)
      expect(timers.pending).toBe(0)
      timers.advance(10_000)
      expect(app.handled).toBe(0)
      // The dropped request still counts (no skipFailedRequests): the next one is the second of the window.
      const next = await call(app, timers)
      expect([next.info?.used, next.waited, app.handled]).toEqual([2, 5_000, 1])
    })

    it('skipFailedRequests: failed responses, and a client dropped while delayed, are not counted', async () => {
      const { app, timers } = await setup({ delayAfter: 1, delayMs: 1_000, skipFailedRequests: true })
      for (let i = 0; i < 3; i++) expect((await call(app, timers, '/fail')).status).toBe(500)
      const ok = await call(app, timers)
      // Each failure was counted while it ran (the second and third were delayed), then given back.
      expect([ok.info?.used, ok.waited]).toEqual([1, 0])
      const aborter = new AbortController()
      const dropped = fetch(`${app.url}/`, { signal: aborter.signal }).catch((error: unknown) => error)
      await timers.armed()
      const cleared = timers.cleared()
      aborter.abort()
      await cleared
      await dropped
      const after = await call(app, timers)
      expect([after.info?.used, after.waited]).toEqual([2, 1_000])
    })

    it('skipSuccessfulRequests: successful responses are given back, failed ones count', async () => {
      const { app, timers } = await setup({ delayAfter: 1, delayMs: 700, skipSuccessfulRequests: true })
      for (let i = 0; i < 3; i++) expect((await call(app, timers)).info?.used).toBe(1)
      await call(app, timers, '/fail')
      const next = await call(app, timers)
      expect([next.info?.used, next.waited]).toEqual([2, 700])
    })

    it('skip: a skipped request is neither counted nor delayed, and carries no info', async () => {
      const { app, timers } = await setup({
        delayAfter: 1,
        delayMs: 1_000,
        skip: ((request: unknown) => headerOf(request, 'x-skip') === '1') as never,
      })
      await call(app, timers)
      const skipped = await call(app, timers, '/', { 'x-skip': '1' })
      expect([skipped.info, skipped.waited]).toEqual([null, 0])
      const second = await call(app, timers)
      expect([second.info?.used, second.waited]).toEqual([2, 1_000])
    })

    it("reports the outcome 'delayed' to the observer for a delayed request, 'allowed' otherwise", async () => {
      const outcomes: DecisionOutcome[] = []
      const { app, timers } = await setup({
        delayAfter: 1,
        delayMs: 100,
        name: 'slow',
        observer: { onDecision: (event) => void outcomes.push(event.outcome) },
      })
      await call(app, timers)
      await call(app, timers)
      expect(outcomes).toEqual(['allowed', 'delayed'])
    })

    it('keyGenerator: each key has its own count', async () => {
      const { app, timers } = await setup({
        delayAfter: 1,
        delayMs: 100,
        keyGenerator: ((request: unknown) => headerOf(request, 'x-user') ?? 'anonymous') as never,
      })
      await call(app, timers, '/', { 'x-user': 'a' })
      const b = await call(app, timers, '/', { 'x-user': 'b' })
      const a = await call(app, timers, '/', { 'x-user': 'a' })
      expect([b.info?.key, b.waited, a.info?.key, a.waited]).toEqual(['b', 0, 'a', 100])
    })
  })
})

/** The status of the response a two-parameter `requestWasSuccessful` gets: `statusCode`, or `status` (Koa, Hono). */
function statusOf(response: unknown): number {
  const { statusCode, status } = response as { statusCode?: number; status?: number }
  return statusCode ?? status ?? Number.NaN
}

// Issue 32: slowDown() called `requestWasSuccessful` with its callbacks' arguments only, where rateLimit() calls a
// function of one parameter with the status code: `(statusCode) => statusCode < 400` got the request, judged no
// response a success, and skipSuccessfulRequests gave nothing back.
describe.each(SLOW_FRAMEWORKS)(
  '$name: requestWasSuccessful by its form, as rateLimit() calls it',
  (framework) => {
    const start = async (requestWasSuccessful: (...args: never[]) => unknown) => {
      const timers = new ManualTimers(new ManualClock())
      // The store's clock stands still: the requests of a test are all in one window.
      const app = await framework.start({
        store: new MemoryStore({ clock: new ManualClock(1_800_000_000_000).read }),
        timers,
        delayAfter: 1,
        delayMs: 700,
        skipSuccessfulRequests: true,
        requestWasSuccessful: requestWasSuccessful as never,
      })
      apps.push(app)
      return { app, timers }
    }

    /** Three successes given back, then a failure that counts: the next request is the second of the window. */
    async function successesGivenBack(app: SlowApp, timers: ManualTimers) {
      const used: (number | undefined)[] = []
      for (let i = 0; i < 3; i++) used.push((await call(app, timers)).info?.used)
      await call(app, timers, '/fail')
      const next = await call(app, timers)
      expect([...used, next.info?.used, next.waited]).toEqual([1, 1, 1, 2, 700])
    }

    it('`(statusCode)` gets the status code (regression: it got the request)', async () => {
      const statuses: unknown[] = []
      const { app, timers } = await start((statusCode: number) => {
        statuses.push(statusCode)
        return statusCode < 400
      })
      await successesGivenBack(app, timers)
      expect(statuses.slice(0, 4)).toEqual([200, 200, 200, 500])
    })

    it("`(req, res)` gets the adapter's request and response, as rateLimit()'s", async () => {
      const requests: unknown[] = []
      const { app, timers } = await start((request: unknown, response: unknown) => {
        requests.push(request)
        return statusOf(response) < 400
      })
      await successesGivenBack(app, timers)
      expect(requests.every((each) => typeof each === 'object' && each !== null)).toBe(true)
    })
  },
)

describe('Hono: slowDown() needs the client address', () => {
  it('refuses to guess it: getConnInfo, clientIp or a keyGenerator, named in the error', () => {
    expect(() => honoSlowDown({ delayAfter: 1 })).toThrow(
      expect.objectContaining({
        option: 'getConnInfo',
        message: expect.stringMatching(/`getConnInfo`.*`clientIp\(c\)`.*`keyGenerator` function/),
      }),
    )
    expect(() => honoSlowDown({ keyGenerator: (c) => c.req.header('x-user') ?? '' })).not.toThrow()
  })
})

describe("slowDown() keys by the adapter's rules", () => {
  it('Express: warns once that X-Forwarded-For arrived while proxies are not trusted, as rateLimit() does', async () => {
    const warnings: string[] = []
    const listen = (warning: Error & { code?: string }) => void warnings.push(warning.code ?? '')
    process.on('warning', listen)
    try {
      const app = express5()
      app.use(expressSlowDown({ delayAfter: 10 }))
      app.get('/', (request, response) => {
        response.json(request.slowDown ?? null)
      })
      const server = app.listen(0, '127.0.0.1')
      const running = { ...(await listening(server)), server }
      apps.push({ ...running, handled: 0 })
      const answer = await fetch(running.url, { headers: { 'x-forwarded-for': '203.0.113.9' } })
      // Keyed by the socket's address, not by the header a client chose.
      expect(((await answer.json()) as Answered)?.key).toBe('127.0.0.1')
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings).toContain('RATEWINDOW_UNTRUSTED_PROXY')
    } finally {
      process.off('warning', listen)
    }
  })

  it('Express: requestPropertyName moves the info, as in express-slow-down', async () => {
    const app = express5()
    app.use(expressSlowDown({ delayAfter: 3, requestPropertyName: 'speed' }))
    app.get('/', (request, response) => {
      const own = request as unknown as Record<string, unknown>
      response.json({ speed: own.speed ?? null, slowDown: request.slowDown ?? null })
    })
    const server = app.listen(0, '127.0.0.1')
    const running = { ...(await listening(server)), server }
    apps.push({ ...running, handled: 0 })
    const body = (await (await fetch(running.url)).json()) as { speed: Answered; slowDown: Answered }
    expect(body.speed).toMatchObject({ used: 1, limit: 3, remaining: 2, delay: 0 })
    expect(body.slowDown).toBeNull()
    expect(() => expressSlowDown({ requestPropertyName: '' })).toThrow(
      expect.objectContaining({ option: 'requestPropertyName' }),
    )
  })

  it.each([
    ['memory store (a decision made at once)', () => new MemoryStore()],
    ['Redis store (a decision that arrives later)', () => new RedisStore({ client: standaloneClient() })],
  ])(
    'Express: a requestPropertyName the request cannot take (req.ip, a getter) is an error naming the option, on the %s',
    async (_, makeStore) => {
      const unhandled: unknown[] = []
      const record = (reason: unknown) => void unhandled.push(reason)
      process.on('unhandledRejection', record)
      try {
        const app = express5()
        app.use(
          expressSlowDown({ store: makeStore(), prefix: `ip${process.pid}`, requestPropertyName: 'ip' }),
        )
        app.get('/', (_request, response) => {
          response.send('handler')
        })
        app.use(
          (
            error: Error & { option?: string },
            _request: unknown,
            response: express5.Response,
            _next: unknown,
          ) => {
            response.status(500).json({ option: error.option ?? null, message: error.message })
          },
        )
        const server = app.listen(0, '127.0.0.1')
        const running = { ...(await listening(server)), server }
        apps.push({ ...running, handled: 0 })
        const answer = await fetch(running.url, { signal: AbortSignal.timeout(5_000) })
        expect(answer.status).toBe(500)
        const body = (await answer.json()) as { option: string | null; message: string }
        expect(body.option).toBe('requestPropertyName')
        expect(body.message).toContain('received "ip"')
        await new Promise((resolve) => setImmediate(resolve))
        expect(unhandled).toEqual([])
      } finally {
        process.off('unhandledRejection', record)
      }
    },
  )

  it('resetKey forgets a client: its next request is the first of the window again', async () => {
    const timers = new ManualTimers(new ManualClock())
    const middleware = expressSlowDown({ delayAfter: 1, delayMs: 100, timers })
    const app = express5()
    app.set('trust proxy', 'loopback')
    app.use(middleware)
    app.get('/', (request, response) => {
      response.json(request.slowDown ?? null)
    })
    const server = app.listen(0, '127.0.0.1')
    const running = { ...(await listening(server)), server }
    const slow = { ...running, handled: 0 }
    apps.push(slow)
    await call(slow, timers)
    expect((await call(slow, timers)).waited).toBe(100)
    await middleware.resetKey('127.0.0.1')
    const after = await call(slow, timers)
    expect([after.info?.used, after.waited]).toEqual([1, 0])
  })
})

describe.each(SLOW_FRAMEWORKS.filter((framework) => framework.name.startsWith('Nest')))(
  '$name: slowDown() as a Nest middleware',
  (framework) => {
    it("keys by the platform's own trust-proxy setting, and does not warn when the proxy is trusted", async () => {
      const warnings: string[] = []
      const listen = (warning: Error & { code?: string }) => void warnings.push(warning.code ?? '')
      process.on('warning', listen)
      try {
        // The harness trusts 127.0.0.1 (Express's 'loopback', Fastify's trustProxy: '127.0.0.1').
        const app = await framework.start({ delayAfter: 10 })
        apps.push(app)
        const answer = await fetch(app.url, { headers: { 'x-forwarded-for': '203.0.113.9' } })
        expect(((await answer.json()) as Answered)?.key).toBe('203.0.113.9')
        await new Promise((resolve) => setImmediate(resolve))
        expect(warnings).not.toContain('RATEWINDOW_UNTRUSTED_PROXY')
      } finally {
        process.off('warning', listen)
      }
    })

    it.each([
      ['memory store (a decision made at once)', () => new MemoryStore()],
      ['Redis store (a decision that arrives later)', () => new RedisStore({ client: standaloneClient() })],
    ])(
      "a bad value a callback returns goes to the app's exception filters, on the %s",
      async (_, makeStore) => {
        const unhandled: unknown[] = []
        const record = (reason: unknown) => void unhandled.push(reason)
        process.on('unhandledRejection', record)
        try {
          const app = await framework.start({
            store: makeStore(),
            prefix: `nestbad${process.pid}`,
            delayAfter: 0,
            delayMs: () => Number.NaN,
          })
          apps.push(app)
          const answer = await fetch(app.url, { signal: AbortSignal.timeout(5_000) })
          // The harness's filter answers a thrown error 500 with its code.
          expect(answer.status).toBe(500)
          expect(await answer.json()).toEqual({ error: 'ERR_RATEWINDOW_INVALID_OPTION' })
          expect(app.handled).toBe(0)
          await new Promise((resolve) => setImmediate(resolve))
          expect(unhandled).toEqual([])
        } finally {
          process.off('unhandledRejection', record)
        }
      },
    )
  },
)
