/**
 * Issue 47, item 7: `ratewindow inspect` on a limiter with a quota rule shows each rule's used and limit and when
 * the quota's period ends, read from the Redis an application wrote (the app's own limiter options as the config).
 */
import { join } from 'node:path'
import { RateLimiter, type RateLimiterOptions, RedisStore } from '@ratewindow/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { redisEnvironment, standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { limiters } from './fixtures/quota-limiters.mjs'
import { ensureBuilt, ratewindow } from './support.js'

const CONFIG = join(import.meta.dirname, 'fixtures/quota-limiters.mjs')

beforeAll(ensureBuilt, 300_000)

describe('ratewindow inspect: a quota rule', () => {
  it('shows the period end beside used and limit (JSON and table)', async () => {
    const prefix = uniquePrefix()
    const { name: _name, ...options } = limiters[0] as RateLimiterOptions & { name: string }
    const limiter = new RateLimiter({
      ...options,
      store: new RedisStore({ client: standaloneClient(), prefix }),
    })
    for (let i = 0; i < 3; i++) expect((await limiter.limit('acme')).allowed).toBe(true)
    const usage = await limiter.usage('acme')
    const args = [
      '--redis',
      `redis://127.0.0.1:${redisEnvironment().standalonePort}`,
      '--prefix',
      prefix,
      '--config',
      CONFIG,
    ]
    const inspected = await ratewindow(['inspect', 'acme', ...args, '--json'])
    expect(inspected.code).toBe(0)
    const monthly = inspected.json().limiters[0].rules[1]
    expect(monthly).toMatchObject({
      name: 'monthly',
      algorithm: 'quota',
      limit: 1000,
      used: 3,
      remaining: 997,
    })
    expect(monthly.periodEnd).toBe(usage.rules[1]!.periodEnd)
    // The 17th at 09:00 in Paris, after now.
    expect(new Date(monthly.periodEnd).getUTCDate()).toBe(17)
    expect(monthly.periodEnd).toBeGreaterThan(Date.now())
    // Without the config: its quota's rules are not in its namespace, and the CLI says so, not "no state".
    const bare = await ratewindow(['inspect', 'acme', ...args.slice(0, 4)])
    expect(bare.code).toBe(2)
    expect(bare.stderr).toMatch(/"acme" has state in .*pass --config/)
    expect(bare.stderr).not.toMatch(/No state/)
    const text = await ratewindow(['inspect', 'acme', ...args])
    expect(text.stdout).toMatch(/PERIOD ENDS/)
    expect(text.stdout).toContain(new Date(monthly.periodEnd).toISOString())
  })
})
