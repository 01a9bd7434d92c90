/**
 * Issue 47, item 2: the admin endpoint on a limiter with plans. `GET /limiters` names the plans; a key's view and
 * `top` show each key's own plan and limit, read from what the store recorded.
 */
import { fixedWindow, MemoryStore, quota, RateLimiter } from '@ratewindow/core'
import { describe, expect, it } from 'vitest'
import { adminHandler } from '../src/index.js'

describe('admin endpoint: plans', () => {
  it("names the plans, and shows each key's own plan and limit", async () => {
    const api = new RateLimiter({
      // A store clock inside an hour: the test never crosses a window.
      store: new MemoryStore({ maxKeys: 1_000, clock: () => Date.parse('2026-03-10T12:30:00Z') }),
      name: 'api',
      plans: {
        free: [
          fixedWindow({ limit: 10, window: '1h', name: 'hourly' }),
          quota({ limit: 100, period: 'month', name: 'monthly' }),
        ],
        pro: [
          fixedWindow({ limit: 100, window: '1h', name: 'hourly' }),
          quota({ limit: 10_000, period: 'month', name: 'monthly' }),
        ],
      },
    })
    for (let i = 0; i < 8; i++) await api.limit('small', { plan: 'free' })
    for (let i = 0; i < 20; i++) await api.limit('big', { plan: 'pro' })
    const admin = adminHandler({
      limiters: [api],
      authorize: (request) => request.headers.get('authorization') === 'Bearer t',
      basePath: '/_rw',
    })
    const get = async (path: string) => {
      const response = await admin(
        new Request(`http://admin.test/_rw${path}`, { headers: { authorization: 'Bearer t' } }),
      )
      expect(response.status).toBe(200)
      return response.json()
    }
    const { limiters } = await get('/limiters')
    expect(limiters[0]).toMatchObject({ name: 'api', plans: ['free', 'pro'] })
    const big = await get('/limiters/api/keys/big')
    expect(big.plan).toBe('pro')
    expect(big.rules.map(({ limit, used }: { limit: number; used: number }) => [limit, used])).toEqual([
      [100, 20],
      [10_000, 20],
    ])
    const { keys } = await get('/limiters/api/top?count=2')
    expect(keys).toEqual([
      { key: 'small', plan: 'free', rule: 'hourly', used: 8, limit: 10, remaining: 2 },
      { key: 'big', plan: 'pro', rule: 'hourly', used: 20, limit: 100, remaining: 80 },
    ])
  })
})
