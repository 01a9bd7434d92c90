import { describe, expect, it } from 'vitest'
import {
  fixedWindow,
  MemoryStore,
  RateLimiter,
  RedisStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '../src/index.js'

const counter = (limit: number) => slidingWindowCounter({ limit, window: '1m' })
const fakeClient = { defineCommand: () => {}, del: async () => 0 }

describe('RateLimiter: counter identity', () => {
  it('keeps limiters with different limits apart on one store (regression: same window shared a counter)', async () => {
    const store = new MemoryStore({ clock: () => 1_700_000_000_000 })
    const global = new RateLimiter({ rules: counter(10), store })
    const login = new RateLimiter({ rules: counter(3), store })
    expect(global.namespace).not.toBe(login.namespace)
    for (let i = 0; i < 3; i++) await global.limit('client')
    expect((await login.limit('client')).remaining).toBe(2)
  })

  it('refuses a second limiter with the same rules on the same store, naming both fixes', () => {
    const store = new MemoryStore()
    new RateLimiter({ rules: counter(5), store })
    expect(() => new RateLimiter({ rules: counter(5), store })).toThrow(
      expect.objectContaining({
        code: 'ERR_RATEWINDOW_SHARED_COUNTER',
        message: expect.stringMatching(/own `prefix`.*same `group`/),
      }),
    )
    expect(() => new RateLimiter({ rules: counter(5), store, prefix: 'other' })).not.toThrow()
    expect(() => new RateLimiter({ rules: counter(5), store: new MemoryStore() })).not.toThrow()
  })

  it('shares one budget across the limiters of a group', async () => {
    const store = new MemoryStore({ clock: () => 1_700_000_000_000 })
    const a = new RateLimiter({ rules: counter(3), store, group: 'login' })
    const b = new RateLimiter({ rules: counter(3), store, group: 'login' })
    expect(a.namespace).toBe('rw:g=login:')
    expect(b.namespace).toBe(a.namespace)
    await a.limit('client')
    await b.limit('client')
    await a.limit('client')
    expect((await b.limit('client')).allowed).toBe(false)
  })

  it('refuses group members whose rules differ, and a malformed group name', () => {
    const store = new MemoryStore()
    new RateLimiter({ rules: counter(3), store, group: 'login' })
    expect(() => new RateLimiter({ rules: counter(4), store, group: 'login' })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_SHARED_COUNTER', option: 'group' }),
    )
    expect(() => new RateLimiter({ rules: counter(3), group: 'a group' })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'group' }),
    )
  })

  it('gives the namespace up on release()', () => {
    const store = new MemoryStore()
    const first = new RateLimiter({ rules: counter(5), store })
    first.release()
    expect(() => new RateLimiter({ rules: counter(5), store })).not.toThrow()
  })

  it('derives namespaces from algorithm, window and limit, short even for many rules', () => {
    const many = [
      fixedWindow({ limit: 10, window: '1s' }),
      slidingWindowLog({ limit: 100, window: '1m' }),
      counter(1_000),
      tokenBucket({ capacity: 20, refillRate: 5 }),
    ]
    const limiter = new RateLimiter({ rules: many })
    expect(limiter.namespace.length).toBeLessThan(24)
    expect(new RateLimiter({ rules: counter(7) }).namespace).toBe('rw:swc60000x7:')
  })
})

describe('unknown option names', () => {
  it.each([
    ['RateLimiter', () => new RateLimiter({ rules: counter(1), max: 5 } as never), 'max', /`limit: 100`/],
    [
      'RateLimiter',
      () => new RateLimiter({ rules: counter(1), keyPrefix: 'x' } as never),
      'keyPrefix',
      /`prefix`/,
    ],
    [
      'circuitBreaker',
      () => new RateLimiter({ rules: counter(1), circuitBreaker: { threshold: 3 } } as never),
      'threshold',
      /Known options: failures/,
    ],
    ['MemoryStore', () => new MemoryStore({ maxkeys: 10 } as never), 'maxkeys', /Did you mean `maxKeys`/],
    [
      'RedisStore',
      () => new RedisStore({ client: fakeClient, redis: fakeClient } as never),
      'redis',
      /`store: new RedisStore/,
    ],
    ['a window rule', () => slidingWindowCounter({ max: 5, window: '1m' } as never), 'max', /`limit/],
    [
      'a token bucket',
      () => tokenBucket({ capacity: 5, refillRate: 1, period: '1s' } as never),
      'period',
      /Known options/,
    ],
  ])('%s refuses %#', (_, build, option, hint) => {
    expect(build).toThrow(expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option }))
    expect(build).toThrow(hint)
  })
})
