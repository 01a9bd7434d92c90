/**
 * Issue 47, item 2: the operator tools know each key's plan. An application's middleware options with plans (its
 * `key` and `plan` functions included) are the CLI's `--config` as they are; `top` ranks keys by the share of their
 * own plan's limit and shows the plan, and `inspect` shows the key's plan, limits and usage, read from Redis.
 */
import { join } from 'node:path'
import { RateLimiter, RedisStore } from '@ratewindow/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { redisEnvironment, standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { plans } from './fixtures/plan-limiters.mjs'
import { ensureBuilt, ratewindow } from './support.js'

const CONFIG = join(import.meta.dirname, 'fixtures/plan-limiters.mjs')

beforeAll(ensureBuilt, 300_000)

describe('ratewindow top and inspect: a limiter with plans', () => {
  it("show each key's own plan and limit, from the application's own options", async () => {
    const prefix = uniquePrefix()
    // The application's limiter, as its middleware makes it (the same name and plans).
    const app = new RateLimiter({
      name: 'api',
      plans,
      store: new RedisStore({ client: standaloneClient(), prefix }),
    })
    for (let i = 0; i < 30; i++) await app.limit('acme', { plan: 'pro' })
    for (let i = 0; i < 12; i++) await app.limit('solo', { plan: 'free' })
    const args = ['--redis', `redis://127.0.0.1:${redisEnvironment().standalonePort}`, '--prefix', prefix]
    const top = await ratewindow(['top', ...args, '--config', CONFIG, '--json'])
    expect(top.code).toBe(0)
    // solo: 12 of free's 60 per minute (20 %); acme: 30 of pro's 600 (5 %). GCRA drains as time passes (pro's 10 a
    // second): `used` is read at the scan's time, never more than was counted.
    const rows = top.json().keys as { plan: string; rule: string; used: number; limit: number }[]
    expect(rows.map(({ plan, rule, limit }) => ({ plan, rule, limit }))).toEqual([
      { plan: 'free', rule: 'per-minute', limit: 60 },
      { plan: 'pro', rule: 'per-minute', limit: 600 },
    ])
    expect(rows[0]!.used).toBeLessThanOrEqual(12)
    expect(rows[1]!.used).toBeLessThanOrEqual(30)
    const table = await ratewindow(['top', ...args, '--config', CONFIG])
    expect(table.stdout).toMatch(/KEY\s+LIMITER\s+PLAN\s+RULE/)
    const inspected = await ratewindow(['inspect', 'acme', ...args, '--config', CONFIG, '--json'])
    expect(inspected.code).toBe(0)
    const [api] = inspected.json().limiters
    expect(api.plan).toBe('pro')
    expect(api.rules.map(({ name, limit }: Record<string, unknown>) => ({ name, limit }))).toEqual([
      { name: 'per-minute', limit: 600 },
      { name: 'monthly', limit: 1_000_000 },
    ])
    // The month's quota does not drain: 30 used.
    expect(api.rules[1].used).toBe(30)
    const text = await ratewindow(['inspect', 'acme', ...args, '--config', CONFIG])
    expect(text.stdout).toMatch(/plan: pro/)
  })
})
