/**
 * `adminHandler()` and `adminStats()` options (coded errors at construction, naming the option), what `authorize`
 * and a failing store do to an answer, and the Space-Saving sketch behind `GET /stats`.
 */
import { fixedWindow, MemoryStore, RateLimiter, RedisStore, type Store } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { freePort } from '../../../test/support/redis-server.js'
import { adminHandler, adminStats } from '../src/index.js'
import { SpaceSaving } from '../src/space-saving.js'

const limiter = (name = 'api', store: Store = new MemoryStore()) =>
  new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), store, name, overrides: true })

const get = (path: string, headers: Record<string, string> = {}) =>
  new Request(`http://admin.test${path}`, { headers })

describe('adminHandler options', () => {
  it('refuses to start without `authorize`, naming it', () => {
    for (const authorize of [undefined, 'token', {}]) {
      expect(() => adminHandler({ limiters: [limiter()], authorize } as never)).toThrow(
        expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'authorize' }),
      )
    }
  })

  it('names every other bad option at construction', () => {
    const authorize = () => true
    const cases: [Record<string, unknown>, string, string][] = [
      [{ limiters: [] }, 'ERR_RATEWINDOW_INVALID_OPTION', 'limiters'],
      [{ limiters: [{}] }, 'ERR_RATEWINDOW_INVALID_OPTION', 'limiters[0]'],
      [{ limiters: [limiter(), limiter()] }, 'ERR_RATEWINDOW_INVALID_OPTION', 'limiters[1]'],
      [{ basePath: 'admin' }, 'ERR_RATEWINDOW_INVALID_OPTION', 'basePath'],
      [{ basePath: '/admin/' }, 'ERR_RATEWINDOW_INVALID_OPTION', 'basePath'],
      // Paths no request can match as written (an outside attack found them accepted, then 404 for ever).
      ...['/a b', '/admin?x', '//admin', '/..', '/admin/../x', '/%61dmin', '/admin#x'].map(
        (basePath): [Record<string, unknown>, string, string] => [
          { basePath },
          'ERR_RATEWINDOW_INVALID_OPTION',
          'basePath',
        ],
      ),
      [{ stats: {} }, 'ERR_RATEWINDOW_INVALID_OPTION', 'stats'],
      [{ maxBodyBytes: 0 }, 'ERR_RATEWINDOW_INVALID_OPTION', 'maxBodyBytes'],
      [{ limit: -1 }, 'ERR_RATEWINDOW_INVALID_LIMIT', 'limit'],
      [{ window: 'often' }, 'ERR_RATEWINDOW_INVALID_WINDOW', 'window'],
      [{ onError: 'log' }, 'ERR_RATEWINDOW_INVALID_OPTION', 'onError'],
    ]
    for (const [options, code, option] of cases) {
      expect(() => adminHandler({ limiters: [limiter()], authorize, ...options } as never)).toThrow(
        expect.objectContaining({ code, option }),
      )
    }
    // A middleware whose rules come from a function has no limiter yet: refused, naming the entry.
    const perPlan = expressRateLimit({ rules: () => fixedWindow({ limit: 2, window: '1m' }) })
    expect(() => adminHandler({ limiters: [perPlan], authorize })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'limiters[0]' }),
    )
    expect(() => adminHandler({ limiters: [limiter()], authorize, authorise: authorize } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION' }),
    )
    expect(() => adminStats({ capacity: 0 })).toThrow(expect.objectContaining({ option: 'capacity' }))
    expect(() => adminStats({ top: 5 } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION' }),
    )
  })

  it('an `authorize` that throws refuses the request (403) and reports the error; nothing crashes', async () => {
    const errors: unknown[] = []
    const admin = adminHandler({
      limiters: [limiter()],
      authorize: () => {
        throw new Error('token store down')
      },
      onError: (error) => void errors.push(error),
    })
    const answer = await admin(get('/limiters', { authorization: 'Bearer x' }))
    expect(answer.status).toBe(403)
    expect(errors).toEqual([new Error('token store down')])
  })

  it('a store that fails answers 503 (ERR_RATEWINDOW_STORE…), never a 500, naming no address', async () => {
    // A Redis that is not there: nothing listens on the port, and the client queues nothing while offline.
    const client = new Redis({
      host: '127.0.0.1',
      port: await freePort(),
      enableOfflineQueue: false,
      lazyConnect: true,
    })
    client.on('error', () => {})
    const api = limiter('api', new RedisStore({ client }))
    const admin = adminHandler({
      limiters: [api],
      authorize: () => true,
    })
    const answer = await admin(get('/limiters/api/keys/k'))
    expect(answer.status).toBe(503)
    const body = await answer.json()
    expect(body.error.code).toMatch(/^ERR_RATEWINDOW_STORE/) // _TIMEOUT: RedisStore waited for a connection
    expect(JSON.stringify(body)).not.toMatch(/127\.0\.0\.1|writeable|ECONNREFUSED/)
    client.disconnect()
  })

  it('a limiter without `overrides: true` is listed as such and its override routes answer 409', async () => {
    const plain = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), name: 'plain' })
    const admin = adminHandler({ limiters: [plain], authorize: () => true })
    expect((await (await admin(get('/limiters'))).json()).limiters[0].overrides).toBe(false)
    const answer = await admin(get('/limiters/plain/overrides/k'))
    expect([answer.status, (await answer.json()).error.code]).toEqual([409, 'ERR_RATEWINDOW_OVERRIDES_OFF'])
    expect((await admin(get('/limiters/plain/keys/k'))).status).toBe(200) // inspect works on any limiter
  })

  it('GET /stats without `stats` answers 404 naming the option', async () => {
    const admin = adminHandler({ limiters: [limiter()], authorize: () => true })
    const answer = await admin(get('/stats'))
    expect(answer.status).toBe(404)
    expect((await answer.json()).error.message).toMatch(/adminStats\(\)/)
  })
})

describe('adminStats', () => {
  it('counts outcomes as allowed or refused, and keys of refusals only, keeping at most `capacity`', async () => {
    const stats = adminStats({ capacity: 2, clock: () => 1_000 })
    const api = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      name: 'api',
      observer: stats,
    })
    for (const key of ['a', 'a', 'a', 'b', 'b', 'c', 'c', 'c', 'c']) await api.limit(key)
    const view = stats.view()
    expect(view.since).toBe(1_000)
    expect(view.decisions).toEqual({ api: { allowed: 3, refused: 6 } })
    expect(view.refused).toHaveLength(2)
    expect(view.refused[0]).toEqual({ limiter: 'api', key: 'c', count: 4 }) // 'b' gave way to 'c' and its count
  })

  it('keeps a limiter name and a key apart whatever they hold', () => {
    const stats = adminStats()
    const event = (limiter: string, key: string) =>
      ({ limiter, outcome: 'limited', result: { key } }) as Parameters<typeof stats.onDecision>[0]
    stats.onDecision(event('a:1', 'b'))
    stats.onDecision(event('a', ':1b'))
    expect(stats.view().refused).toEqual(
      expect.arrayContaining([
        { limiter: 'a:1', key: 'b', count: 1 },
        { limiter: 'a', key: ':1b', count: 1 },
      ]),
    )
  })
})

describe('SpaceSaving', () => {
  it('never undercounts, overcounts by at most its error, and keeps every item above total / capacity', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 30 }), { maxLength: 400 }),
        fc.integer({ min: 1, max: 12 }),
        (stream, capacity) => {
          const sketch = new SpaceSaving(capacity)
          const truth = new Map<string, number>()
          for (const value of stream) {
            sketch.add(String(value))
            truth.set(String(value), (truth.get(String(value)) ?? 0) + 1)
          }
          const counted = sketch.top(capacity)
          expect(counted.length).toBe(Math.min(capacity, truth.size))
          for (const { item, count, error } of counted) {
            expect(count).toBeGreaterThanOrEqual(truth.get(item)!)
            expect(count - error).toBeLessThanOrEqual(truth.get(item)!)
          }
          for (const [item, count] of truth)
            if (count > stream.length / capacity) expect(counted.map((each) => each.item)).toContain(item)
        },
      ),
    )
  })
})
