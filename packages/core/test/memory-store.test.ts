import { describe, expect, it, vi } from 'vitest'
import type { Decision } from '../src/index.js'
import {
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
} from '../src/index.js'
import { sha256Base64url } from '../src/support/hash.js'

describe('MemoryStore', () => {
  it('holds at most maxKeys keys and evicts the least recently used', async () => {
    const now = 1_000_000
    const store = new MemoryStore({ clock: () => now, maxKeys: 3 })
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1h' }), store })
    for (const key of ['a', 'b', 'c']) await limiter.limit(key)
    await limiter.limit('a') // touch: 'b' is now the least recently used
    await limiter.limit('d')
    expect(store.size).toBe(3)
    expect((await limiter.peek('a')).allowed).toBe(false) // kept
    expect((await limiter.peek('b')).allowed).toBe(true) // evicted, starts afresh
    expect((await limiter.peek('c')).allowed).toBe(false)
  })

  it('drops keys once expired, and never stores a key that holds nothing', async () => {
    let now = 1_000_000
    const store = new MemoryStore({ clock: () => now })
    const limiter = new RateLimiter({ rules: slidingWindowCounter({ limit: 5, window: '1s' }), store })
    await limiter.limit('a')
    await limiter.peek('never-consumed')
    await limiter.limit('zero', { cost: 0 })
    expect(store.size).toBe(1)
    now += 1_999 // the counter's state lasts until its count has left the previous window too
    store.sweep()
    expect(store.size).toBe(1)
    now += 1
    store.sweep()
    expect(store.size).toBe(0)
  })

  it('hashes very long identifiers so that the key bound is a memory bound', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1m' }), store })
    const long = 'x'.repeat(10_000)
    await limiter.limit(long)
    expect((await limiter.limit(long)).allowed).toBe(false)
    expect((await limiter.limit(`${long}y`)).allowed).toBe(true)
  })

  it('no identifier reaches the counter of a long one by spelling its hashed form (regression: `#<sha256>` was an alias)', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 3, window: '1m' }), store })
    const victim = `user:${'v'.repeat(200)}`
    const alias = `#${sha256Base64url(victim)}`
    // The alias spends the victim's budget no more than the victim spends the alias's.
    const aliasAnswers = []
    for (let i = 0; i < 3; i++) aliasAnswers.push((await limiter.limit(alias)).allowed)
    expect(aliasAnswers).toEqual([true, true, true])
    expect((await limiter.limit(victim)).remaining).toBe(2)
    expect((await limiter.peek(alias)).remaining).toBe(0)
    // A short identifier starting with `#` keeps a counter of its own, apart from every other spelling.
    expect((await limiter.limit('#short')).remaining).toBe(2)
    expect((await limiter.limit('short')).remaining).toBe(2)
  })

  it('grows the log ring buffer up to the limit and keeps order across wrap-around', async () => {
    let now = 0
    const limiter = new RateLimiter({
      rules: slidingWindowLog({ limit: 20, window: 100 }),
      store: new MemoryStore({ clock: () => now }),
    })
    let admitted = 0
    for (let i = 0; i < 500; i++) {
      now += 3
      if ((await limiter.limit('k')).allowed) admitted++
    }
    // 20 per 100 ms, at one request every 3 ms: 20 admitted in each 100 ms, exactly.
    expect(admitted).toBe(300)
  })

  it('limiters with different prefixes or rules do not share state', async () => {
    const store = new MemoryStore()
    const rule = fixedWindow({ limit: 1, window: '1m' })
    const a = new RateLimiter({ rules: rule, store, prefix: 'a' })
    const b = new RateLimiter({ rules: rule, store, prefix: 'b' })
    const c = new RateLimiter({
      rules: [rule, slidingWindowLog({ limit: 1, window: '1m', name: 'log' })],
      store,
      prefix: 'a',
    })
    expect((await a.limit('k')).allowed).toBe(true)
    expect((await b.limit('k')).allowed).toBe(true)
    expect((await c.limit('k')).allowed).toBe(true)
    expect((await a.limit('k')).allowed).toBe(false)
  })

  it.each([
    ['NaN', Number.NaN],
    ['negative', -5],
    ['infinite', Number.POSITIVE_INFINITY],
  ])('a clock reading %s is an error the limiter reports, not "no limit"', async (_, reading) => {
    let now = 1_000_000
    const store = new MemoryStore({ clock: () => now })
    const errors: unknown[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m' }),
      store,
      onStoreError: 'deny',
      onError: (error) => errors.push(error),
      circuitBreaker: false,
    })
    await limiter.limit('k')
    now = reading
    const results = [await limiter.limit('k'), await limiter.limit('k'), await limiter.limit('k')]
    expect(results.map((result) => [result.allowed, result.source])).toEqual(Array(3).fill([false, 'policy']))
    expect(errors).toHaveLength(3)
    expect(errors[0]).toMatchObject({ code: 'ERR_RATEWINDOW_STORE', option: 'clock' })
    expect(() => store.sweep()).toThrow(expect.objectContaining({ code: 'ERR_RATEWINDOW_STORE' }))
    now = 1_000_001
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 0, source: 'store' })
    store.close()
  })
})

describe('MemoryStore: identifiers that differ by a lone surrogate (issue 32, attack round)', () => {
  it('keeps their counters apart when they are hashed (a # prefix, or over 128 characters): one shared counter before', async () => {
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 3, window: '1h' }),
      store: new MemoryStore(),
    })
    for (const [a, b] of [
      ['#\uD800', '#\uDBFF'],
      [`${'x'.repeat(200)}\uDC00`, `${'x'.repeat(200)}\uFFFD`],
    ]) {
      for (let i = 0; i < 3; i++) await limiter.limit(a!)
      expect((await limiter.limit(b!)).allowed).toBe(true)
    }
  })
})

describe('MemoryStore’s default clock (issue 32, attack round)', () => {
  it('a step of the wall clock while slots are reserved gives no new caller a slot beside them (a 3 s step placed the next slot 3 s early)', async () => {
    const store = new MemoryStore()
    const rule = gcra({ limit: 10, window: '1s', burst: 1 })
    const limiter = new RateLimiter({ rules: rule, store })
    const request = { prefix: limiter.namespace, key: 'k', rules: [rule], cost: 1, reserve: 60_000 }
    const slotOf = (decision: Decision, sentAt: number) => sentAt + (decision.wait ?? 0)
    let last = 0
    for (let i = 0; i < 40; i++) last = slotOf(store.consume(request) as Decision, performance.now())
    // The wall clock steps 3 s forward (NTP, a resumed VM): Date.now is all it moves.
    const wall = Date.now
    const stepped = vi.spyOn(Date, 'now').mockImplementation(() => wall.call(Date) + 3_000)
    try {
      const next = slotOf(store.consume(request) as Decision, performance.now())
      // One interval (100 ms) after the queue's last slot, on the steady clock (a ms for rounding to whole ms).
      expect(next - last).toBeGreaterThanOrEqual(99)
    } finally {
      stepped.mockRestore()
    }
    store.close?.()
  })

  it('follows vi.setSystemTime() alone, without fake timers (Vitest swaps in a Date of its own)', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1h' }), store })
    vi.setSystemTime(1_700_000_000_000)
    try {
      expect((await limiter.limit('b')).allowed).toBe(true)
      expect((await limiter.limit('b')).allowed).toBe(false)
      vi.setSystemTime(1_700_000_000_000 + 3_600_000)
      expect((await limiter.limit('b')).allowed).toBe(true)
    } finally {
      vi.useRealTimers()
    }
  })

  it('follows a test’s fake Date (vi.useFakeTimers, vi.setSystemTime), even when built before it', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1h' }), store })
    vi.useFakeTimers({ toFake: ['Date'], now: 1_700_000_000_000 })
    try {
      expect((await limiter.limit('a')).allowed).toBe(true)
      expect((await limiter.limit('a')).allowed).toBe(false)
      vi.setSystemTime(1_700_000_000_000 + 3_600_000)
      expect((await limiter.limit('a')).allowed).toBe(true)
    } finally {
      vi.useRealTimers()
    }
  })
})
