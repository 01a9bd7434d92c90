import {
  type DecisionEvent,
  fixedWindow,
  type Store,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { parseList } from 'structured-headers'
import request from 'supertest'
import { describe, expect, it, vi } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { open, until } from '../support/connections.js'
import {
  type AppSpec,
  appPerTest,
  BOTH_PATHS,
  headerOf,
  releaseHeld,
  storesOnClock,
  waitForHeld,
} from './harness.js'

/** A fresh store per app: one store object serves one limiter of each rule set (docs/counters.md). */
const failingStore = (): Store => ({
  consume: () => Promise.reject(new Error('connection refused')),
  peek: () => Promise.reject(new Error('connection refused')),
  refund: () => Promise.reject(new Error('connection refused')),
  reset: () => Promise.reject(new Error('connection refused')),
})

const stores = storesOnClock('http')

describe.each(BOTH_PATHS)('$name', (framework) => {
  // Nest 11's Express adapter sends an error body as application/json whatever type was set (packages/nestjs/README.md).
  const problemType =
    framework.name === 'Nest 11 on Express' ? /^application\/json/ : /^application\/problem\+json/
  const { start, close } = appPerTest((spec: AppSpec) => framework.start(spec))

  describe.each(stores)('with the %s', (_, makeStore) => {
    it('admits the limit, then answers 429 with truthful draft-6 headers and a JSON body', async () => {
      const clock = new ManualClock(1_700_000_080_000) // 40 s into a minute
      const url = await start({
        global: { limit: 2, window: '1m', algorithm: 'fixed-window', store: makeStore(clock) },
      })
      const first = await request(url).get('/').expect(200, 'ok')
      expect(first.headers).toMatchObject({
        'ratelimit-policy': '2;w=60',
        'ratelimit-limit': '2',
        'ratelimit-remaining': '1',
        'ratelimit-reset': '20',
      })
      expect(first.headers['retry-after']).toBeUndefined()
      await request(url).get('/').expect(200)
      clock.advance(500)
      const denied = await request(url).get('/').expect(429)
      expect(denied.headers['retry-after']).toBe('20') // 19.5 s rounded up
      expect(denied.headers['ratelimit-reset']).toBe('20')
      expect(denied.headers['ratelimit-remaining']).toBe('0')
      expect(denied.headers['content-type']).toMatch(/^application\/json/)
      expect(denied.body).toEqual({
        error: 'Too Many Requests',
        message: 'Too many requests: retry in 20 seconds.',
        retryAfter: 20,
      })
      clock.advance(19_500)
      await request(url).get('/').expect(200)
    })

    it('groups IPv6 clients by /56 and keeps neighbouring prefixes apart', async () => {
      const url = await start({ global: { limit: 1, store: makeStore(new ManualClock()) } })
      await request(url).get('/').set('X-Forwarded-For', '2001:db8:1:100::1').expect(200)
      await request(url).get('/').set('X-Forwarded-For', '2001:db8:1:1ff:abcd::2').expect(429)
      await request(url).get('/').set('X-Forwarded-For', '2001:db8:1:200::1').expect(200)
      await request(url).get('/').set('X-Forwarded-For', '::ffff:198.51.100.7').expect(200)
      await request(url).get('/').set('X-Forwarded-For', '198.51.100.7').expect(429)
    })

    it('shadow limiter: every request passes, without RateLimit headers, reported as shadow-limited with its route', async () => {
      const clock = new ManualClock(1_700_000_080_000)
      const events: DecisionEvent[] = []
      const url = await start({
        route: {
          limit: 2,
          window: '1m',
          shadow: true,
          name: 'shadowed',
          store: makeStore(clock),
          observer: { onDecision: (event) => void events.push(event) },
        },
      })
      for (let i = 0; i < 4; i++) {
        const response = await request(url).get('/limited').expect(200, 'limited route')
        expect(response.headers['ratelimit-limit']).toBeUndefined()
        expect(response.headers['ratelimit-policy']).toBeUndefined()
        expect(response.headers['retry-after']).toBeUndefined()
      }
      expect(events.map((event) => event.outcome)).toEqual([
        'allowed',
        'allowed',
        'shadow-limited',
        'shadow-limited',
      ])
      expect(events[3]!.result).toMatchObject({ allowed: true, shadow: true })
      expect(events[3]!.result.rules[0]!.allowed).toBe(false)
      // Koa without @koa/router knows no route pattern.
      const route = framework.name.startsWith('Koa') ? undefined : '/limited'
      expect(new Set(events.map((event) => event.route))).toEqual(new Set([route]))
      expect(new Set(events.map((event) => event.limiter))).toEqual(new Set(['shadowed']))
    })

    it('shadow rule next to an enforcing one: headers describe the enforcing rule only; switching enforces', async () => {
      const clock = new ManualClock(1_699_999_200_000) // the start of an hour
      const store = makeStore(clock)
      const rules = (shadow: boolean) => [
        fixedWindow({ limit: 1, window: '1m', name: 'burst', shadow }),
        fixedWindow({ limit: 3, window: '1h', name: 'hourly' }),
      ]
      const outcomes: string[] = []
      const url = await start({
        global: {
          rules: rules(true),
          store,
          group: 'rollout', // the enforcing app below counts on the same counters
          headers: 'draft-11',
          observer: { onDecision: (event) => void outcomes.push(`${event.outcome}:${event.rule}`) },
        },
      })
      const passed = []
      for (let i = 0; i < 3; i++) passed.push(await request(url).get('/').expect(200))
      expect(passed.map((response) => response.headers['ratelimit'])).toEqual([
        '"hourly";r=2;t=3600',
        '"hourly";r=1;t=3600',
        '"hourly";r=0;t=3600',
      ])
      expect(passed[1]!.headers['ratelimit-policy']).toBe('"hourly";q=3;w=3600')
      const denied = await request(url).get('/').expect(429)
      expect(parseList(denied.headers['ratelimit'] ?? '').map(([name]) => name)).toEqual(['hourly'])
      expect(outcomes).toEqual([
        'allowed:hourly',
        'shadow-limited:burst',
        'shadow-limited:burst',
        'limited:hourly',
      ])
      await close()
      // The same rules enforcing: one option changed; the burst rule now refuses.
      clock.advance(3_600_000)
      const url2 = await start({ global: { rules: rules(false), store, group: 'rollout' } })
      await request(url2).get('/').expect(200)
      expect((await request(url2).get('/').expect(429)).headers['retry-after']).toBe('60')
    })

    it('penalty: repeated denials block the client with the configured status and a truthful Retry-After', async () => {
      const clock = new ManualClock(1_700_000_000_000)
      const url = await start({
        global: {
          limit: 1,
          window: '1s',
          algorithm: 'fixed-window',
          penalty: { after: 2, within: '10s', block: '30s', factor: 2, maxBlock: '1m', statusCode: 403 },
          store: makeStore(clock),
        },
      })
      await request(url).get('/').expect(200)
      // Denied by the rule: the ordinary status; the second denial starts the block.
      expect((await request(url).get('/').expect(429)).headers['retry-after']).toBe('1')
      const blocked = await request(url).get('/').expect(403)
      expect(blocked.headers['retry-after']).toBe('30')
      expect(blocked.body).toMatchObject({ retryAfter: 30 })
      clock.advance(10_500) // the window has long rolled over; the block has 19.5 s left
      const still = await request(url).get('/').expect(403)
      expect(still.headers['retry-after']).toBe('20')
      expect(still.headers['ratelimit-remaining']).toBe('0')
      // Another client is not blocked.
      await request(url).get('/').set('X-Forwarded-For', '198.51.100.9').expect(200)
      clock.advance(19_500)
      await request(url).get('/').expect(200)
      await request(url).get('/').expect(429)
      // A repeat right after the block: twice as long.
      expect((await request(url).get('/').expect(403)).headers['retry-after']).toBe('60')
    })

    it('penalty block: its own body wording (default JSON and problem details) and the observer outcome blocked', async () => {
      for (const problemDetails of [false, true]) {
        const clock = new ManualClock(1_700_000_000_000)
        const outcomes: string[] = []
        const url = await start({
          global: {
            limit: 1,
            window: '1s',
            algorithm: 'fixed-window',
            penalty: { after: 2, within: '10s', block: '30s', statusCode: 403 },
            problemDetails,
            observer: { onDecision: (event) => void outcomes.push(event.outcome) },
            store: makeStore(clock),
          },
        })
        await request(url).get('/').expect(200)
        const limited = await request(url).get('/').expect(429)
        const blocked = await request(url).get('/').expect(403)
        if (problemDetails) {
          expect(limited.body).toMatchObject({ title: expect.stringMatching(/quota/), status: 429 })
          expect(blocked.headers['content-type']).toMatch(problemType)
          expect(blocked.body).toEqual({
            type: 'about:blank',
            title: 'Forbidden',
            status: 403,
            detail: 'Blocked after repeated rate limit violations: retry in 30 seconds.',
          })
        } else {
          expect(limited.body).toMatchObject({ error: 'Too Many Requests' })
          expect(blocked.body).toEqual({
            error: 'Forbidden',
            message: 'Blocked after repeated rate limit violations: retry in 30 seconds.',
            retryAfter: 30,
            blocked: true,
          })
        }
        clock.advance(5_000)
        await request(url).get('/').expect(403)
        expect(outcomes).toEqual(['allowed', 'limited', 'blocked', 'blocked'])
        await close()
      }
    })

    it('reserve-then-settle: req.rateLimit.settle(actual) refunds an overestimate and charges an underestimate in full, owed past zero', async () => {
      const clock = new ManualClock(1_700_000_000_000)
      const url = await start({
        global: { limit: 100, window: '1h', algorithm: 'fixed-window', cost: 10, store: makeStore(clock) },
      })
      // Reserved 10, used 4: 6 come back. The headers, not sent yet, follow the settled charge (issue 20).
      const first = await request(url).get('/settle?n=4').expect(200)
      expect(first.body).toEqual({ charged: 0, refunded: 6, uncharged: 0 })
      expect(first.headers['ratelimit-remaining']).toBe('96')
      expect((await request(url).get('/state').expect(200)).body).toMatchObject({ remaining: 86 })
      // Reserved 10, used 50: 40 more charged at once (86 − 10 − 40 = 36; /state reserves 10 more).
      const second = await request(url).get('/settle?n=50').expect(200)
      expect(second.body).toEqual({ charged: 40, refunded: 0, uncharged: 0 })
      expect(second.headers['ratelimit-remaining']).toBe('36')
      expect((await request(url).get('/state').expect(200)).body).toMatchObject({ remaining: 26 })
      // Reserved 10 of the 26 left, used 100: the 90 more are charged in full, 74 past the limit (within `maxDebt`,
      // one limit by default): owed, so the quota shows zero and the next request waits until the debt has passed.
      expect((await request(url).get('/settle?n=100').expect(200)).body).toEqual({
        charged: 90,
        refunded: 0,
        uncharged: 0,
      })
      const denied = await request(url).get('/').expect(429)
      expect(denied.headers['ratelimit-remaining']).toBe('0')
    })

    it('concurrency: at most N in flight, draft-11 headers with qu="concurrent-requests", slots back when responses end', async () => {
      const clock = new ManualClock(1_700_000_000_000)
      const url = await start({
        global: {
          limit: 100,
          window: '1m',
          headers: 'draft-11',
          concurrency: { limit: 2, lease: '1m' },
          store: makeStore(clock),
        },
      })
      const parked = [request(url).get('/hold'), request(url).get('/hold')].map((pending) =>
        pending.then((response) => response),
      )
      await waitForHeld(2)
      const denied = await request(url).get('/').expect(429)
      expect(denied.headers['retry-after']).toBe('1')
      expect(denied.headers['ratelimit']).toBe('"concurrency";r=0')
      expect(denied.headers['ratelimit-policy']).toBe(
        '"100-per-1m";q=100;w=60, "concurrency";q=2;qu="concurrent-requests"',
      )
      releaseHeld()
      for (const response of await Promise.all(parked)) expect(response.status).toBe(200)
      const served = await request(url).get('/').expect(200)
      // The denied request's rate limit charge was given back: 3 served so far.
      expect(served.headers['ratelimit']).toBe('"100-per-1m";r=97;t=60, "concurrency";r=1')
      const [[, params]] = parseList(served.headers['ratelimit-policy']!).slice(1) as [
        [string, Map<string, unknown>],
      ]
      expect(params.get('qu')).toBe('concurrent-requests')
    })

    it('concurrency with `releaseOnClose`: a client that closes the connection gives its slot back', async () => {
      const clock = new ManualClock(1_700_000_000_000)
      const url = await start({
        global: { limit: 100, concurrency: { limit: 1, releaseOnClose: true }, store: makeStore(clock) },
      })
      // Its own connection, destroyed: fetch's abort left the socket open until undici's keep-alive ran out (4 s).
      const client = open(`${url}/hold`)
      await waitForHeld(1)
      await request(url).get('/').expect(429)
      client.close()
      expect(client.status).toBeUndefined()
      let status = 0
      await until(
        async () => {
          status = (await request(url).get('/')).status
          return status === 200
        },
        'the closed connection gives its slot back (GET / answers 200)',
        { every: 10 },
      )
      expect(status).toBe(200)
      releaseHeld()
    })

    it('checks several rules at once, all-or-nothing', async () => {
      const clock = new ManualClock(1_699_999_200_000) // the start of an hour
      const url = await start({
        global: {
          rules: [
            tokenBucket({ capacity: 2, refillRate: 1, interval: '1s' }),
            fixedWindow({ limit: 3, window: '1h' }),
          ],
          store: makeStore(clock),
        },
      })
      await request(url).get('/').expect(200)
      const second = await request(url).get('/').expect(200)
      expect(second.headers['ratelimit-remaining']).toBe('0')
      expect(second.headers['ratelimit-policy']).toBe('2;w=2, 3;w=3600')
      expect((await request(url).get('/').expect(429)).headers['retry-after']).toBe('1')
      clock.advance(1_000)
      const third = await request(url).get('/').expect(200)
      expect(third.headers['ratelimit-limit']).toBe('3') // the hourly rule is now the tightest: 0 left
      clock.advance(5_000)
      expect((await request(url).get('/').expect(429)).headers['retry-after']).toBe('3594')
    })
    it('draft-11: names every policy, and on a denial only those that block', async () => {
      const clock = new ManualClock(1_699_999_200_000) // the start of an hour
      const url = await start({
        global: {
          rules: [
            slidingWindowLog({ limit: 2, window: '10s', name: 'burst' }),
            fixedWindow({ limit: 100, window: '1h', name: 'hourly' }),
          ],
          headers: 'draft-11',
          store: makeStore(clock),
        },
      })
      const first = await request(url).get('/').expect(200)
      expect(first.headers['ratelimit-policy']).toBe('"burst";q=2;w=10, "hourly";q=100;w=3600')
      expect(first.headers['ratelimit']).toBe('"burst";r=1;t=10, "hourly";r=99;t=3600')
      clock.advance(4_000)
      const second = await request(url).get('/').expect(200)
      expect(second.headers['ratelimit']).toBe('"burst";r=0;t=10, "hourly";r=98;t=3596')
      clock.advance(1_000)
      const denied = await request(url).get('/').expect(429)
      expect(denied.headers['ratelimit']).toBe('"burst";r=0;t=5')
      expect(denied.headers['retry-after']).toBe('5')
      const [[name, params]] = parseList(denied.headers['ratelimit']!) as [[string, Map<string, number>]]
      expect([name, Object.fromEntries(params)]).toEqual(['burst', { r: 0, t: 5 }])
      expect(parseList(denied.headers['ratelimit-policy']!)).toHaveLength(2)
    })
  })

  it('writes draft-7, draft-8 (with a keyed partition key), legacy, or no headers', async () => {
    let url = await start({ global: { limit: 5, headers: 'draft-7', legacyHeaders: true } })
    const draft7 = await request(url).get('/').expect(200)
    expect(draft7.headers['ratelimit']).toMatch(/^limit=5, remaining=4, reset=\d+$/)
    expect(draft7.headers['ratelimit-policy']).toBe('5;w=60')
    expect(draft7.headers['x-ratelimit-limit']).toBe('5')
    expect(draft7.headers['x-ratelimit-remaining']).toBe('4')
    expect(Number(draft7.headers['x-ratelimit-reset'])).toBeGreaterThan(Date.now() / 1000)
    await close()
    url = await start({
      global: {
        limit: 5,
        window: '1m',
        headers: 'draft-8',
        partitionKeySecret: 'a-server-secret-of-32-characters',
      },
    })
    const draft8 = await request(url).get('/').expect(200)
    expect(draft8.headers['ratelimit-policy']).toMatch(/^"5-per-1m";q=5;w=60;pk=:[A-Za-z0-9+/]{16}:$/)
    expect(draft8.headers['ratelimit']).toMatch(/^"5-per-1m";r=4;t=\d+;pk=:[A-Za-z0-9+/]{16}:$/)
    expect(JSON.stringify(draft8.headers)).not.toContain('127.0.0.1')
    await close()
    url = await start({ global: { limit: 1, headers: false } })
    const none = await request(url).get('/').expect(200)
    expect(Object.keys(none.headers).filter((name) => name.includes('ratelimit'))).toEqual([])
    expect((await request(url).get('/').expect(429)).headers['retry-after']).toMatch(/^\d+$/)
  })

  it('answers with RFC 9457 problem details when asked', async () => {
    const url = await start({ global: { limit: 1, problemDetails: true, statusCode: 429 } })
    await request(url).get('/')
    const denied = await request(url).get('/').expect(429)
    expect(denied.headers['content-type']).toMatch(problemType)
    expect(JSON.parse(denied.text)).toMatchObject({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      status: 429,
      'violated-policies': ['1-per-1m'],
    })
  })

  it('takes `message` as a string, an object, or a function, and `statusCode`', async () => {
    let url = await start({ global: { limit: 1, message: 'slow down', statusCode: 503 } })
    await request(url).get('/')
    const text = await request(url).get('/').expect(503)
    if (framework.name.startsWith('Nest')) {
      // A thrown HttpException with a string: Nest's exception filter sends it as JSON (packages/nestjs/README.md).
      expect(text.body).toEqual({ statusCode: 503, message: 'slow down' })
    } else {
      expect(text.text).toBe('slow down')
      expect(text.headers['content-type']).toMatch(/^text\/plain/)
    }
    await close()
    url = await start({
      global: { limit: 1, message: (_request, result) => ({ wait: result.retryAfter > 0 }) },
    })
    await request(url).get('/')
    expect((await request(url).get('/').expect(429)).body).toEqual({ wait: true })
  })

  it('does not count skipped requests', async () => {
    const url = await start({
      global: { limit: 1, skip: (req: unknown) => headerOf(req, 'x-internal') === 'yes' },
    })
    await request(url).get('/').set('X-Internal', 'yes').expect(200)
    await request(url).get('/').set('X-Internal', 'yes').expect(200)
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(429)
  })

  it('charges `cost` per request, fixed or per request', async () => {
    let url = await start({ global: { limit: 5, cost: 2 } })
    expect((await request(url).get('/').expect(200)).headers['ratelimit-remaining']).toBe('3')
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(429)
    await close()
    url = await start({ global: { limit: 5, cost: (req: unknown) => Number(headerOf(req, 'x-cost') ?? 1) } })
    expect((await request(url).get('/').set('X-Cost', '4').expect(200)).headers['ratelimit-remaining']).toBe(
      '1',
    )
    await request(url).get('/').set('X-Cost', '2').expect(429)
    await request(url).get('/').expect(200)
  })

  it('takes `limit` as a function of the request and `key` as a function', async () => {
    const url = await start({
      global: {
        limit: (req: unknown) => (headerOf(req, 'x-plan') === 'pro' ? 3 : 1),
        key: (req: unknown) => headerOf(req, 'x-user') ?? 'anonymous',
      },
    })
    await request(url).get('/').set('X-User', 'free-user').expect(200)
    await request(url).get('/').set('X-User', 'free-user').expect(429)
    for (let i = 0; i < 3; i++)
      await request(url).get('/').set('X-User', 'pro-user').set('X-Plan', 'pro').expect(200)
    await request(url).get('/').set('X-User', 'pro-user').set('X-Plan', 'pro').expect(429)
  })

  it('skipFailedRequests gives back requests that failed; skipSuccessfulRequests those that passed', async () => {
    let url = await start({ global: { limit: 2, skipFailedRequests: true } })
    for (let i = 0; i < 4; i++) await request(url).get('/fail').expect(500)
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(429)
    await close()
    url = await start({ global: { limit: 2, skipSuccessfulRequests: true } })
    for (let i = 0; i < 4; i++) await request(url).get('/').expect(200)
    await request(url).get('/fail').expect(500)
    await request(url).get('/fail').expect(500)
    await request(url).get('/fail').expect(429)
  })

  it('limits one route on its own', async () => {
    const url = await start({ route: { limit: 1 } })
    await request(url).get('/limited').expect(200)
    await request(url).get('/limited').expect(429)
    for (let i = 0; i < 3; i++) await request(url).get('/').expect(200)
  })

  it('exposes the result on the request', async () => {
    const url = await start({ global: { limit: 3 } })
    const { body } = await request(url).get('/state').expect(200)
    expect(body).toMatchObject({ allowed: true, limit: 3, remaining: 2, key: '127.0.0.1', source: 'store' })
  })

  it('fails open by default when the store fails, and reports the failure', async () => {
    const onError = vi.fn()
    const url = await start({ global: { limit: 1, store: failingStore(), onError } })
    const response = await request(url).get('/').expect(200, 'ok')
    expect(response.headers['ratelimit-limit']).toBeUndefined() // no figures to report: nothing invented
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ message: 'connection refused' }), {
      operation: 'consume',
      key: '127.0.0.1',
      limiter: expect.any(String),
    })
  })

  it('fails closed with 503 and Retry-After when onStoreError is deny', async () => {
    const url = await start({
      global: { limit: 1, store: failingStore(), onStoreError: 'deny', onError: () => {} },
    })
    const response = await request(url).get('/').expect(503)
    expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1)
  })

  it('passes a key failure to the framework error handling, and keeps serving', async () => {
    const url = await start({
      global: {
        limit: 1,
        key: () => {
          throw Object.assign(new Error('no key'), { code: 'NO_KEY' })
        },
      },
    })
    expect((await request(url).get('/').expect(500)).body).toEqual({ error: 'NO_KEY' })
    expect((await request(url).get('/').expect(500)).body).toEqual({ error: 'NO_KEY' })
  })

  it('rejects bad options at construction, naming the option', async () => {
    await expect(framework.start({ global: { limit: 10, window: '1x' as never } })).rejects.toThrow(
      /`window`/,
    )
    await expect(framework.start({ global: { algorithm: 'leaky' as never } })).rejects.toThrow(/`algorithm`/)
    await expect(framework.start({ global: { headers: 'draft-5' as never } })).rejects.toThrow(/`headers`/)
  })

  it('uses the algorithm asked for', async () => {
    const url = await start({ global: { limit: 2, window: '10s', algorithm: 'sliding-window-log' } })
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(200)
    const denied = await request(url).get('/').expect(429)
    expect(Number(denied.headers['retry-after'])).toBeLessThanOrEqual(10)
  })
})

void slidingWindowCounter
void slidingWindowLog
