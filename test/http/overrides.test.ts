import { type DecisionEvent, fixedWindow, LimiterOverrides, MemoryStore, RateLimiter } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import { rateLimit as honoRateLimit } from '@ratewindow/hono'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import Fastify from 'fastify'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { type AppSpec, appPerTest, BOTH_PATHS } from './harness.js'

// Operating a key from another limiter: the records live under the prefix and `name`, not the rules, so an admin
// limiter with its own rules (its own counters) reads and writes the middleware's records.
const CLIENT = '198.51.100.7'

describe.each(BOTH_PATHS)('$name: overrides and manual blocks (issue 34)', (framework) => {
  const { start } = appPerTest((spec: AppSpec) => framework.start(spec))

  async function serve(penalty?: { statusCode: number }) {
    const clock = new ManualClock(1_700_000_080_000) // 40 s into a minute
    const store = new MemoryStore({ clock: clock.read })
    const events: DecisionEvent[] = []
    const url = await start({
      global: {
        limit: 2,
        window: '1m',
        algorithm: 'fixed-window',
        store,
        name: 'api',
        overrides: true,
        observer: { onDecision: (event) => void events.push(event) },
        ...(penalty === undefined ? {} : { penalty: { after: 100, within: '1s', block: '1s', ...penalty } }),
      },
    })
    const admin = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1h' }),
      store,
      name: 'api',
      overrides: true,
    })
    const get = (client = CLIENT) => request(url).get('/').set('X-Forwarded-For', client)
    return { admin, events, get }
  }

  it('an override shows in the RateLimit headers and the policy at the next request', async () => {
    const { admin, events, get } = await serve()
    expect((await get().expect(200)).headers['ratelimit-limit']).toBe('2')
    await admin.overrides.set(CLIENT, { limit: 5 })
    const raised = await get().expect(200)
    expect(raised.headers).toMatchObject({
      'ratelimit-policy': '5;w=60',
      'ratelimit-limit': '5',
      'ratelimit-remaining': '3',
    })
    expect(events.map((event) => event.override)).toEqual([undefined, 'limits'])
  })

  it("a block answers the limiter's status with an operator's message and Retry-After the rest of the block; never the reason", async () => {
    for (const penalty of [undefined, { statusCode: 403 }]) {
      const { admin, events, get } = await serve(penalty)
      await admin.overrides.block(CLIENT, { for: '1h', reason: 'fraud ticket 12' })
      const refused = await get().expect(penalty?.statusCode ?? 429)
      expect(refused.headers['retry-after']).toBe('3600')
      expect(refused.body).toMatchObject({
        message: 'Blocked by an operator: retry in 3600 seconds.',
        blocked: true,
      })
      expect(JSON.stringify(refused.body)).not.toContain('fraud')
      expect(events.at(-1)).toMatchObject({ outcome: 'blocked', override: 'block' })
      await get('198.51.100.8').expect(200)
      await admin.overrides.unblock(CLIENT)
      await get().expect(200)
    }
  })
})

describe('every middleware hands out its limiter overrides (issue 34)', () => {
  it('Express, Koa and Hono: `middleware.overrides`; Fastify: `fastify.ratewindow.overrides(scope)`', async () => {
    const clock = new ManualClock(1_700_000_080_000)
    const options = { limit: 2, window: '1m', overrides: true, name: 'api' } as const
    const handles = [
      expressRateLimit({ ...options, store: new MemoryStore({ clock: clock.read }) }).overrides,
      koaRateLimit({ ...options, store: new MemoryStore({ clock: clock.read }) }).overrides,
      honoRateLimit({ ...options, key: () => 'k', store: new MemoryStore({ clock: clock.read }) }).overrides,
    ]
    const app = Fastify()
    await app.register(fastifyRateLimit, { ...options, store: new MemoryStore({ clock: clock.read }) })
    await app.ready()
    handles.push(app.ratewindow.overrides())
    for (const handle of handles) {
      expect(handle).toBeInstanceOf(LimiterOverrides)
      await handle.set('k', { limit: 7 })
      expect((await handle.inspect('k')).rules[0]).toMatchObject({ limit: 7, overridden: true, used: 0 })
    }
    await app.close()
  })
})
