/**
 * Issue 47, item 6: a request refused by a quota rule (its period's allowance used) answers apart from a rate
 * refusal, on every framework: its own status (`quotaStatusCode`, here 402), a body naming the quota and when it
 * renews, `Retry-After` to the period's end, and the policy fields describing the quota; a rate refusal stays 429.
 */
import { gcra, MemoryStore, quota } from '@ratewindow/core'
import { rateLimit } from '@ratewindow/express'
import express from 'express'
import { describe, expect, it } from 'vitest'
import { type AppSpec, appPerTest, FRAMEWORKS } from './harness.js'

/** Noon UTC on the 29th of March 2026: the day in Paris (23 hours, summer time) ends at 22:00 UTC, 10 hours on. */
const NOON = Date.parse('2026-03-29T12:00:00Z')
const QUOTA_USED = 'https://github.com/ratewindow/ratewindow/blob/main/docs/plans-and-quotas.md#quota-used'

const spec = (options: AppSpec['global'] = {}): AppSpec => ({
  global: {
    store: new MemoryStore({ clock: () => NOON, maxKeys: 1_000 }),
    rules: [
      gcra({ limit: 5, window: '1m' }),
      quota({ limit: 2, period: 'day', timeZone: 'Europe/Paris', name: 'daily' }),
    ],
    quotaStatusCode: 402,
    ...options,
  },
})

describe.each(FRAMEWORKS)('$name: a quota refusal', (framework) => {
  const { start } = appPerTest((given: AppSpec) => framework.start(given))

  it('answers 402 naming the quota, Retry-After to the end of the day in Paris', async () => {
    const url = await start(spec())
    for (let i = 0; i < 2; i++) expect((await fetch(url)).status).toBe(200)
    const refused = await fetch(url)
    expect(refused.status).toBe(402)
    expect(refused.headers.get('retry-after')).toBe(String(10 * 3600))
    expect(refused.headers.get('ratelimit-policy')).toMatch(/2;w=86400/)
    expect(await refused.json()).toEqual({
      error: 'Quota Exceeded',
      message: "The quota 'daily' is used until 2026-03-29T22:00:00.000Z: retry in 36000 seconds.",
      quota: 'daily',
      renews: '2026-03-29T22:00:00.000Z',
      retryAfter: 36_000,
    })
  })
})

describe.each(FRAMEWORKS.filter(({ name }) => /Express 5|Fastify 5|Hono/.test(name)))(
  '$name: a soft limit (warnAt, warnHeader)',
  (framework) => {
    const { start } = appPerTest((given: AppSpec) => framework.start(given))

    it('adds RateLimit-Warning once the quota is past its warnAt share, on admitted responses only', async () => {
      const url = await start({
        global: {
          store: new MemoryStore({ clock: () => NOON, maxKeys: 1_000 }),
          rules: [
            gcra({ limit: 50, window: '1m' }),
            quota({ limit: 4, period: 'day', timeZone: 'Europe/Paris', name: 'daily', warnAt: 0.5 }),
          ],
          warnHeader: true,
        },
      })
      const warnings = []
      for (let i = 0; i < 5; i++) {
        const response = await fetch(url)
        warnings.push([response.status, response.headers.get('ratelimit-warning')])
      }
      expect(warnings).toEqual([
        [200, null],
        [200, '"daily";q=4;r=2'],
        [200, '"daily";q=4;r=1'],
        [200, '"daily";q=4;r=0'],
        [429, null],
      ])
    })
  },
)

describe('a quota refusal on Express 5', () => {
  const framework = FRAMEWORKS[0]!
  const { start } = appPerTest((given: AppSpec) => framework.start(given))

  it('as problem details: a type of its own, the violated policy named', async () => {
    const url = await start(spec({ problemDetails: true }))
    for (let i = 0; i < 2; i++) await fetch(url)
    const refused = await fetch(url)
    expect(refused.status).toBe(402)
    expect(refused.headers.get('content-type')).toMatch(/application\/problem\+json/)
    expect(await refused.json()).toMatchObject({
      type: QUOTA_USED,
      status: 402,
      'violated-policies': ['daily'],
    })
  })

  it('a costly request the quota cannot hold says what is left, not that it is used', async () => {
    const url = await start(
      spec({ cost: (request: unknown) => ((request as { path: string }).path === '/' ? 1 : 2) }),
    )
    expect((await fetch(url)).status).toBe(200)
    // 1 of 2 left; this request costs 2.
    const refused = await fetch(`${url}/limited`)
    expect(refused.status).toBe(402)
    expect(await refused.json()).toMatchObject({
      message:
        "The quota 'daily' has 1 left until 2026-03-29T22:00:00.000Z, less than this request costs (2): retry in 36000 seconds.",
    })
  })

  it('a rate refusal stays as it is: 429, the usual body', async () => {
    const url = await start(
      spec({
        rules: [
          gcra({ limit: 1, window: '1m' }),
          quota({ limit: 5, period: 'day', timeZone: 'Europe/Paris', name: 'daily' }),
        ],
      }),
    )
    expect((await fetch(url)).status).toBe(200)
    const refused = await fetch(url)
    expect(refused.status).toBe(429)
    expect(await refused.json()).toMatchObject({ error: 'Too Many Requests' })
  })

  it('without quotaStatusCode, a quota refusal takes statusCode', async () => {
    const url = await start(spec({ quotaStatusCode: undefined, statusCode: 503 }))
    for (let i = 0; i < 2; i++) await fetch(url)
    expect((await fetch(url)).status).toBe(503)
  })

  it('an invalid quotaStatusCode is refused at construction, naming it', async () => {
    await expect(start(spec({ quotaStatusCode: 200 }))).rejects.toThrow(/`quotaStatusCode`/)
  })
})

describe("a middleware's handle", () => {
  it('reads usage for a billing page: middleware.operator.usage(key)', async () => {
    const store = new MemoryStore({ clock: () => Date.parse('2026-03-10T12:00:00Z'), maxKeys: 1_000 })
    const limited = rateLimit({
      store,
      rules: quota({ limit: 1_000, period: 'month', name: 'monthly' }),
      key: () => 'acme',
    })
    const app = express()
    app.use(limited)
    app.get('/', (_request, response) => void response.send('ok'))
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    try {
      const { port } = server.address() as { port: number }
      for (let i = 0; i < 3; i++) expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(200)
      expect((await limited.operator.usage('acme')).rules[0]).toMatchObject({
        name: 'monthly',
        used: 3,
        periodEnd: Date.parse('2026-04-01T00:00:00Z'),
      })
    } finally {
      server.close()
    }
  })
})
