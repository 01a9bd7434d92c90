import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  type Decision,
  fixedWindow,
  MemoryStore,
  RateLimiter,
  type Store,
  type StoreRequest,
  slidingWindowCounter,
} from '../src/index.js'

/** Wraps a store, counting calls and failing on demand. */
class CountingStore implements Store {
  calls = 0
  failing = false
  hang = false
  constructor(readonly inner: Store = new MemoryStore()) {}
  async consume(request: StoreRequest): Promise<Decision> {
    this.calls++
    if (this.hang) return new Promise(() => {})
    if (this.failing) throw new Error('store down')
    return this.inner.consume(request)
  }
  async peek(request: StoreRequest): Promise<Decision> {
    return this.inner.peek(request)
  }
  async refund(): Promise<void> {}
  async reset(): Promise<void> {}
}

afterEach(() => {
  vi.useRealTimers()
})

describe('failure policy', () => {
  it('answers by the policy on a timeout, without waiting for the store', async () => {
    vi.useFakeTimers()
    const store = new CountingStore()
    store.hang = true
    const onError = vi.fn()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      store,
      timeout: 100,
      onError,
    })
    const pending = limiter.limit('k')
    await vi.advanceTimersByTimeAsync(100)
    const result = await pending
    expect(result).toMatchObject({ allowed: true, source: 'policy' })
    expect(onError.mock.calls[0]![0]).toMatchObject({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' })
  })

  it("fails closed with onStoreError: 'deny'", async () => {
    const store = new CountingStore()
    store.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      store,
      onStoreError: 'deny',
      onError: () => {},
    })
    expect(await limiter.limit('k')).toMatchObject({ allowed: false, source: 'policy' })
    expect((await limiter.limit('k')).retryAfter).toBeGreaterThanOrEqual(1_000)
  })

  it('answers from the fallback store while the main one fails', async () => {
    const store = new CountingStore()
    store.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m' }),
      store,
      fallback: new MemoryStore(),
      onError: () => {},
    })
    expect((await limiter.limit('k')).source).toBe('fallback')
    expect((await limiter.limit('k')).allowed).toBe(true)
    expect((await limiter.limit('k')).allowed).toBe(false)
  })

  it('reports every failure to onError, and by default logs them throttled', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {})
    const store = new CountingStore()
    store.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      store,
      circuitBreaker: false,
    })
    for (let i = 0; i < 20; i++) await limiter.limit('k')
    expect(log).toHaveBeenCalledTimes(1)
    expect(String(log.mock.calls[0]![0])).toContain('store down')
    log.mockRestore()
  })
})

describe('circuit breaker', () => {
  it('stops calling a failing store, probes it after the cooldown, and closes on success', async () => {
    let now = 0
    const store = new CountingStore()
    store.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 100, window: '1m' }),
      store,
      onError: () => {},
      circuitBreaker: { failures: 3, cooldown: 1_000, clock: () => now },
    })
    for (let i = 0; i < 10; i++) expect((await limiter.limit('k')).source).toBe('policy')
    expect(store.calls).toBe(3) // open after 3 failures: the other 7 never waited on the store
    now = 999
    await limiter.limit('k')
    expect(store.calls).toBe(3)
    now = 1_000
    await limiter.limit('k') // the probe fails: open again
    expect(store.calls).toBe(4)
    now = 2_000
    store.failing = false
    expect((await limiter.limit('k')).source).toBe('store') // the probe succeeds: closed
    expect((await limiter.limit('k')).source).toBe('store')
    expect(store.calls).toBe(6)
  })
})

describe('blocked-key cache', () => {
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
