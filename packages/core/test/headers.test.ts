import { describe, expect, it } from 'vitest'
import {
  fixedWindow,
  MemoryStore,
  partitionKey,
  RateLimiter,
  type RateLimitResult,
  rateLimitHeaders,
  slidingWindowCounter,
  tokenBucket,
} from '../src/index.js'

async function resultAfter(waitMs: number, allowed: boolean): Promise<RateLimitResult> {
  // A real decision, then the reset and retry fields set to the case under test.
  let now = 0
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 100, window: '1m' }),
    store: new MemoryStore({ clock: () => now }),
  })
  now = 1_000
  const result = await limiter.limit('k')
  return { ...result, allowed, remaining: allowed ? 99 : 0, reset: waitMs, retryAfter: allowed ? 0 : waitMs }
}

describe('draft-6 (default)', () => {
  it('writes policy, limit, remaining and reset', async () => {
    expect(rateLimitHeaders(await resultAfter(12_000, true))).toEqual({
      'RateLimit-Policy': '100;w=60',
      'RateLimit-Limit': '100',
      'RateLimit-Remaining': '99',
      'RateLimit-Reset': '12',
    })
  })

  it('on a denial adds Retry-After, equal to the reset value', async () => {
    expect(rateLimitHeaders(await resultAfter(12_000, false))).toEqual({
      'RateLimit-Policy': '100;w=60',
      'RateLimit-Limit': '100',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '12',
      'Retry-After': '12',
    })
  })

  it.each([
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [1, '1'],
  ])('rounds %d ms up to %s s (never 0 while blocked)', async (ms, seconds) => {
    const headers = rateLimitHeaders(await resultAfter(ms, false))
    expect(headers['Retry-After']).toBe(seconds)
    expect(headers['RateLimit-Reset']).toBe(seconds)
  })
})

describe('draft-7', () => {
  it('writes one RateLimit field', async () => {
    expect(rateLimitHeaders(await resultAfter(12_000, false), { format: 'draft-7' })).toEqual({
      'RateLimit-Policy': '100;w=60',
      RateLimit: 'limit=100, remaining=0, reset=12',
      'Retry-After': '12',
    })
  })
})

describe('draft-8', () => {
  it('names every policy and reports each rule', async () => {
    let now = 472_222 * 3_600_000 // the start of an hour
    const limiter = new RateLimiter({
      rules: [
        slidingWindowCounter({ limit: 2, window: '1s', name: 'burst' }),
        fixedWindow({ limit: 1000, window: '1h', name: 'hourly' }),
      ],
      store: new MemoryStore({ clock: () => now }),
    })
    await limiter.limit('k')
    expect(rateLimitHeaders(await limiter.limit('k'), { format: 'draft-8' })).toEqual({
      'RateLimit-Policy': '"burst";q=2;w=1, "hourly";q=1000;w=3600',
      RateLimit: '"burst";r=0;t=2, "hourly";r=998;t=3600',
    })
    now += 500
    const denied = await limiter.limit('k')
    expect(rateLimitHeaders(denied, { format: 'draft-8' })).toEqual({
      'RateLimit-Policy': '"burst";q=2;w=1, "hourly";q=1000;w=3600',
      RateLimit: `"burst";r=0;t=${Math.ceil(denied.retryAfter / 1000)}, "hourly";r=998;t=3600`,
      'Retry-After': String(Math.ceil(denied.retryAfter / 1000)),
    })
  })

  it('adds a keyed partition key, never the bare identifier', async () => {
    const pk = partitionKey('203.0.113.7', 'server-secret')
    expect(pk).toMatch(/^[A-Za-z0-9+/]{16}$/)
    expect(pk).toBe(partitionKey('203.0.113.7', 'server-secret'))
    expect(pk).not.toBe(partitionKey('203.0.113.7', 'other-secret'))
    const headers = rateLimitHeaders(await resultAfter(1_000, true), { format: 'draft-8', partitionKey: pk })
    // Per-rule values come from the rule itself: 59 s left of the minute that began at 0.
    expect(headers['RateLimit']).toBe(`"100-per-1m";r=99;t=59;pk=:${pk}:`)
    expect(JSON.stringify(headers)).not.toContain('203.0.113.7')
  })

  it('names default policies after their limit and window', async () => {
    const limiter = new RateLimiter({ rules: tokenBucket({ capacity: 10, refillRate: 1 }) })
    expect(rateLimitHeaders(await limiter.limit('k'), { format: 'draft-8' })['RateLimit-Policy']).toBe(
      '"10-per-10s";q=10;w=10',
    )
  })
})

describe('legacy and off', () => {
  it('X-RateLimit-Reset is epoch seconds of the reset, opt-in', async () => {
    const result = await resultAfter(12_000, true)
    expect(rateLimitHeaders(result, { format: false, legacy: true })).toEqual({
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Remaining': '99',
      'X-RateLimit-Reset': String(Math.ceil((result.at + 12_000) / 1000)),
    })
  })

  it('format false writes only Retry-After on a denial', async () => {
    expect(rateLimitHeaders(await resultAfter(1_500, true), { format: false })).toEqual({})
    expect(rateLimitHeaders(await resultAfter(1_500, false), { format: false })).toEqual({
      'Retry-After': '2',
    })
  })

  it('rejects an unknown format by name', async () => {
    const result = await resultAfter(1, true)
    expect(() => rateLimitHeaders(result, { format: 'draft-9' as never })).toThrow(/`headers`/)
  })
})
