import { describe, expect, it } from 'vitest'
import {
  fixedWindow,
  MemoryStore,
  quota,
  RateLimiter,
  slidingWindowCounter,
  tokenBucket,
} from '../src/index.js'
import { CountingStore } from './support/counting-store.js'

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

describe('blocked-key cache, denials and reset', () => {
  it('answers a denied key locally until retryAfter, with truthful, shrinking waits', async () => {
    let local = 0
    let storeNow = 1_700_000_000_000
    const store = new CountingStore(new MemoryStore({ clock: () => storeNow }))
    const limiter = new RateLimiter({
      rules: slidingWindowCounter({ limit: 2, window: '10s' }),
      store,
      blockedCache: { clock: () => local },
    })
    await limiter.limit('k')
    await limiter.limit('k')
    const denied = await limiter.limit('k')
    expect(denied).toMatchObject({ allowed: false, source: 'store' })
    const calls = store.calls
    for (let i = 0; i < 100; i++) expect((await limiter.limit('k')).source).toBe('cache')
    expect(store.calls).toBe(calls) // 0 store calls per cached denial
    local += 1_000
    storeNow += 1_000
    const later = await limiter.limit('k')
    expect(later).toMatchObject({ allowed: false, source: 'cache', retryAfter: denied.retryAfter - 1_000 })
    expect(later.rules[0]!.retryAfter).toBe(denied.retryAfter - 1_000)
    // A cheaper request than the denied one asks the store; so does one after the wait.
    expect((await limiter.limit('k', { cost: 0 })).source).toBe('store')
    local += denied.retryAfter
    storeNow += denied.retryAfter
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'store' })
  })

  it('reset clears the cached denial', async () => {
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1h' }), blockedCache: true })
    await limiter.limit('k')
    expect((await limiter.limit('k')).allowed).toBe(false)
    await limiter.reset('k')
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'store' })
  })
})

describe('blocked-key cache, quota refusals', () => {
  // Issue 47: a quota's refusal lasts until its period ends (a month); a raise given to the key in another process
  // must take effect within a minute, not then.
  it('answers a quota refusal from memory for a minute at most, with its true wait, then asks the store', async () => {
    let now = Date.parse('2026-03-10T12:00:00Z')
    const store = new MemoryStore({ clock: () => now, maxKeys: 100 })
    const limiter = new RateLimiter({
      rules: quota({ limit: 1, period: 'month' }),
      store,
      blockedCache: { clock: () => now },
    })
    await limiter.limit('k')
    const refused = await limiter.limit('k')
    expect(refused).toMatchObject({ allowed: false, source: 'store' })
    now += 59_999
    expect(await limiter.limit('k')).toMatchObject({
      allowed: false,
      source: 'cache',
      retryAfter: refused.retryAfter - 59_999,
    })
    now += 1
    expect(await limiter.limit('k')).toMatchObject({ allowed: false, source: 'store' })
  })
})
