/**
 * Issue 47, item 7: the admin endpoint's `GET /limiters/:limiter/keys/:key` on a limiter with a quota rule: each
 * rule's used and limit, and when the quota's period ends, as `limiter.usage` reads them.
 */
import { gcra, MemoryStore, quota, RateLimiter } from '@ratewindow/core'
import { describe, expect, it } from 'vitest'
import { adminHandler } from '../src/index.js'

describe('admin endpoint: a key under a quota', () => {
  it('shows used, limit and the period end of the quota', async () => {
    const store = new MemoryStore({ clock: () => Date.parse('2026-03-10T12:00:00Z'), maxKeys: 1_000 })
    const api = new RateLimiter({
      store,
      name: 'api',
      rules: [gcra({ limit: 60, window: '1m' }), quota({ limit: 1_000, period: 'month', name: 'monthly' })],
    })
    await api.limit('acme', { cost: 7 })
    const admin = adminHandler({
      limiters: [api],
      authorize: (request) => request.headers.get('authorization') === 'Bearer t',
      basePath: '/_rw',
    })
    const response = await admin(
      new Request('http://admin.test/_rw/limiters/api/keys/acme', { headers: { authorization: 'Bearer t' } }),
    )
    expect(response.status).toBe(200)
    const body = await response.json()
    expect(body.rules[1]).toEqual({
      name: 'monthly',
      algorithm: 'quota',
      limit: 1_000,
      overridden: false,
      used: 7,
      remaining: 993,
      nextFree: 0,
      reset: Date.parse('2026-04-01T00:00:00Z') - Date.parse('2026-03-10T12:00:00Z'),
      periodEnd: Date.parse('2026-04-01T00:00:00Z'),
    })
    expect(body.rules[0]).not.toHaveProperty('periodEnd')
  })
})
