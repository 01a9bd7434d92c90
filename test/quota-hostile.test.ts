/**
 * Quotas on the calendar (issue 47), attacked: every attack found against them, as the attacker wrote it (the outside
 * rounds of stop 60 and the new-user trial), against real stores and a real Express server. Quota behaviour itself:
 * the conformance suite's quotas section (packages/testing) and test/quota.test.ts.
 */

import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { MemoryStore, quota, RateLimiter, RedisStore, type Store, slidingWindowLog } from '@ratewindow/core'
import { rateLimit } from '@ratewindow/express'
import express from 'express'
import { describe, expect, it, vi } from 'vitest'
import { ManualClock } from './support/clock.js'
import { standaloneClient, uniquePrefix } from './support/redis.js'

const at = (iso: string) => Date.parse(iso)
const HOUR = 3_600_000

const STORES: [string, (clock: ManualClock) => Store][] = [
  ['MemoryStore', (clock) => new MemoryStore({ clock: clock.read, maxKeys: 1_000 })],
  ['RedisStore', (clock) => new RedisStore({ client: standaloneClient(), clock: clock.read })],
]

/** A daily quota of `limit` with overrides, on the store `makeStore` makes, its clock at noon on the 10th of March. */
function dailyQuota(makeStore: (clock: ManualClock) => Store, limit: number) {
  const clock = new ManualClock(at('2026-03-10T12:00:00Z'))
  const api = new RateLimiter({
    store: makeStore(clock),
    rules: quota({ limit, period: 'day', name: 'daily' }),
    overrides: true,
    prefix: uniquePrefix(),
    timeout: '10s',
  })
  return { clock, api }
}

/** `app` listening on a free port of 127.0.0.1, its URL given to `run`, closed after. */
async function served(app: express.Express, run: (url: string) => Promise<void>): Promise<void> {
  const server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  } finally {
    server.close()
  }
}

describe.each(STORES)('%s: an operator raise that ended', (_name, makeStore) => {
  // F1: a six-hour raise to 1,000, all used; the raise ends. MemoryStore carried the 900 above the coded 100 as debt,
  // a limit a day: the key was refused for nine days, each told to come back in 36 h; Redis said 28 h, not 4.
  it('refuses until the day ends, with that wait, and admits the next day', async () => {
    const { clock, api } = dailyQuota(makeStore, 100)
    await api.operator.set('acme', { limit: 1000 }, { ttl: 6 * HOUR })
    let admitted = 0
    for (let i = 0; i < 1000; i++) if ((await api.limit('acme')).allowed) admitted++
    expect(admitted).toBe(1000)
    clock.set(at('2026-03-10T20:00:00Z'))
    const refused = await api.limit('acme')
    expect(refused).toMatchObject({ allowed: false, retryAfter: 4 * HOUR })
    for (let day = 11; day <= 13; day++) {
      clock.set(at(`2026-03-${day}T12:00:00Z`))
      expect((await api.limit('acme')).allowed).toBe(true)
    }
  })
})

describe.each(STORES)('%s: a settle above a limit lowered since', (_name, makeStore) => {
  // Round 2, finding 2: a raise to 20, 20 used, the raise deleted, then a settle of one more (which charged nothing):
  // the 10 above the coded limit became a debt, and the next day admitted 0 of 10.
  it('what a settle did not charge is no debt: the next day admits its 10', async () => {
    const { clock, api } = dailyQuota(makeStore, 10)
    await api.operator.set('k', { limit: 20 })
    const results = []
    for (let i = 0; i < 20; i++) results.push(await api.limit('k'))
    await api.operator.delete('k')
    expect(await api.settle(results[0]!, 2)).toMatchObject({ charged: 0 })
    clock.set(at('2026-03-11T12:00:00Z'))
    let admitted = 0
    for (let i = 0; i < 12; i++) if ((await api.limit('k')).allowed) admitted++
    expect(admitted).toBe(10)
  })
})

describe('RedisStore: clocks and zones that disagree', () => {
  // Round 2, finding 1: one call from a process clock 26 h (or 30 days) ahead of Redis's TIME stored tomorrow's end
  // (or one 29 days out), and the limiter kept sending those bounds after its clock was set right: every key it
  // decided then was refused into the next day, or for 29 days.
  it("a process clock a day or a month ahead of Redis's stores the end of the period Redis is in", async () => {
    const store = new RedisStore({ client: standaloneClient() })
    const api = new RateLimiter({
      store,
      rules: quota({ limit: 10, period: 'day', timeZone: 'Europe/Paris' }),
      prefix: uniquePrefix(),
      timeout: '10s',
    })
    const real = Date.now()
    // Where Redis's own day in Paris ends (its TIME is this machine's clock).
    const dayEnd = (
      await new RateLimiter({
        store: new MemoryStore({ clock: () => real, maxKeys: 10 }),
        rules: quota({ limit: 10, period: 'day', timeZone: 'Europe/Paris' }),
      }).usage('x')
    ).rules[0]!.periodEnd
    const skew = vi.spyOn(Date, 'now')
    try {
      for (const [key, ahead] of [
        ['A', 26 * HOUR],
        ['B', 720 * HOUR],
        ['C', 0],
      ] as const) {
        skew.mockReturnValue(real + ahead)
        const result = await api.limit(key)
        expect(result).toMatchObject({ allowed: true, source: 'store' })
        // The end of Redis's own day in Paris, however far ahead this process's clock was.
        expect(result.at + result.rules[0]!.reset).toBe(dayEnd)
      }
    } finally {
      skew.mockRestore()
    }
  })

  // F3: the app process's clock 55 h behind Redis's TIME (no `clock` option): every script call wrote a negative TTL
  // ("invalid expire time"), and with the default fail-open every request passed: 50 of 50 on a limit of 10.
  it("a process clock 55 h behind Redis's: 10 of 50 admitted, every answer the store's", async () => {
    const api = new RateLimiter({
      store: new RedisStore({ client: standaloneClient() }),
      rules: quota({ limit: 10, period: 'day' }),
      prefix: uniquePrefix(),
      timeout: '10s',
    })
    const behind = vi.spyOn(Date, 'now').mockReturnValue(Date.now() - 55 * HOUR)
    try {
      const results = []
      for (let i = 0; i < 50; i++) results.push(await api.limit('acme'))
      expect(results.filter((result) => result.allowed)).toHaveLength(10)
      expect(new Set(results.map((result) => result.source))).toEqual(new Set(['store']))
    } finally {
      behind.mockRestore()
    }
  })

  // F5: process A's tzdata stale (Paris at UTC+2 in January) stored the day's end at 22:00Z; process B, right, saw it
  // passed at 22:30Z and started a second count inside its own day: 200 admitted on a daily limit of 100.
  it("an end stored inside this process's day keeps its count: 100 a day, not 200", async () => {
    const client = standaloneClient()
    const clock = new ManualClock(at('2026-01-10T22:30:00Z'))
    const store = new RedisStore({ client, clock: clock.read })
    const rule = quota({ limit: 100, period: 'day', timeZone: 'Europe/Paris' })
    const b = new RateLimiter({ rules: rule, store, prefix: uniquePrefix() })
    // What A left: 100 used, its day ending at 22:00Z.
    await client.set(store.keyFor(b.namespace, 'acme', rule), `${at('2026-01-10T22:00:00Z')}:100`, 'PX', HOUR)
    expect(await b.limit('acme')).toMatchObject({ allowed: false, retryAfter: HOUR / 2 })
    clock.set(at('2026-01-10T23:00:00Z'))
    expect(await b.limit('acme')).toMatchObject({ allowed: true, remaining: 99 })
  })
})

describe('zone names from configuration', () => {
  // F4: case variants of one zone passed validation, each kept a formatter for good (~14 KB of native memory each)
  // and each had a storage id of its own: 'Europe/Paris' and 'europe/paris' counted apart.
  it('one zone however spelled: one storage id', () => {
    const variants = ['Europe/Paris', 'europe/paris', 'EUROPE/PARIS', 'eUrOpE/pArIs']
    const ids = new Set(variants.map((timeZone) => quota({ limit: 1000, period: 'month', timeZone }).id))
    expect(ids.size).toBe(1)
  })
})

describe('Express: a rate rule and a quota refusing', () => {
  // Round 2, finding 3: a rate blocking 60 s and a day's quota renewing in 30 s: the answer was a 402
  // naming the quota ("used until 00:00:00 … retry in 60 seconds").
  it('the rate blocks longer: 429, a rate refusal', async () => {
    const app = express()
    app.use(
      rateLimit({
        store: new MemoryStore({ clock: () => at('2026-03-12T23:59:30Z'), maxKeys: 1_000 }),
        rules: [
          slidingWindowLog({ limit: 1, window: '2m', name: 'per-2-minutes' }),
          quota({ limit: 1, period: 'day', name: 'daily' }),
        ],
        quotaStatusCode: 402,
      }),
    )
    app.get('/', (_request, response) => void response.send('ok'))
    await served(app, async (url) => {
      expect((await fetch(url)).status).toBe(200)
      const refused = await fetch(url)
      expect(refused.status).toBe(429)
      expect(await refused.json()).toMatchObject({ error: 'Too Many Requests' })
    })
  })
})

describe('Express: two quotas refusing', () => {
  // F2: a day's and a month's quota both used; the 402 named the daily one, renewing in 12 h, beside a Retry-After of
  // 60 h (the month's): a client that trusted `renews` came back at 22:00Z and was refused again.
  it('the body names the quota that blocks longest, renewing when Retry-After says', async () => {
    const app = express()
    app.use(
      rateLimit({
        store: new MemoryStore({ clock: () => at('2026-03-29T10:00:00Z'), maxKeys: 1_000 }),
        rules: [
          quota({ limit: 5, period: 'day', timeZone: 'Europe/Paris', name: 'daily' }),
          quota({ limit: 5, period: 'month', timeZone: 'Europe/Paris', name: 'monthly' }),
        ],
        quotaStatusCode: 402,
      }),
    )
    app.get('/', (_request, response) => void response.send('ok'))
    await served(app, async (url) => {
      for (let i = 0; i < 5; i++) expect((await fetch(url)).status).toBe(200)
      // Both used: the day's ends at 22:00Z, in 12 h; the month's on the 31st at 22:00Z, in 60 h.
      const refused = await fetch(url)
      expect(refused.status).toBe(402)
      expect(refused.headers.get('retry-after')).toBe(String(60 * 3600))
      expect(await refused.json()).toMatchObject({ quota: 'monthly', renews: '2026-03-31T22:00:00.000Z' })
    })
  })
})
