import { describe, expect, it } from 'vitest'
import { MemoryStore, RateLimiter, tokenBucket } from '../src/index.js'

describe('blocked-key cache', () => {
  it('answers a costlier request with its own wait, and a retry at that wait passes', async () => {
    let now = 1_700_000_000_000
    let storeCalls = 0
    const memory = new MemoryStore({ clock: () => now })
    const limiter = new RateLimiter({
      rules: tokenBucket({ capacity: 4, refillRate: 1, interval: '1s' }),
      store: {
        consume: (request) => {
          storeCalls++
          return memory.consume(request)
        },
        peek: (request) => memory.peek(request),
        refund: (request) => memory.refund(request),
        reset: (target) => memory.reset(target),
      },
      blockedCache: { clock: () => now },
    })
    for (let i = 0; i < 4; i++) await limiter.limit('k')
    expect(await limiter.limit('k')).toMatchObject({ allowed: false, retryAfter: 1_000, source: 'store' })
    const calls = storeCalls
    const costly = await limiter.limit('k', { cost: 3 })
    expect(costly).toMatchObject({ allowed: false, retryAfter: 3_000, source: 'store' })
    expect(storeCalls).toBe(calls + 1)
    // Both costs are cached now, each with its own wait.
    expect(await limiter.limit('k', { cost: 3 })).toMatchObject({ retryAfter: 3_000, source: 'cache' })
    expect(await limiter.limit('k')).toMatchObject({ retryAfter: 1_000, source: 'cache' })
    expect(storeCalls).toBe(calls + 1)
    now += 3_000
    expect(await limiter.limit('k', { cost: 3 })).toMatchObject({ allowed: true, source: 'store' })
  })
})
