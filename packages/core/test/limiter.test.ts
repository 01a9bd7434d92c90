import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
  type Duration,
  fixedWindow,
  MemoryStore,
  RateLimiter,
  RedisStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '../src/index.js'

const counter = (limit: number) => slidingWindowCounter({ limit, window: '1m' })
const windowed = (limit: number, window: Duration) => slidingWindowCounter({ limit, window })
const fakeClient = { defineCommand: () => {}, del: async () => 0 }

/** The process warnings emitted while `run` runs (they are emitted on the next tick). */
async function warningsOf(run: () => Promise<unknown>): Promise<(Error & { code?: string })[]> {
  const seen: (Error & { code?: string })[] = []
  const listener = (warning: Error) => seen.push(warning)
  process.on('warning', listener)
  try {
    await run()
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', listener)
  }
  return seen
}

describe('RateLimiter: counter identity', () => {
  it('keeps limiters with different limits apart on one store (regression: same window shared a counter)', async () => {
    const store = new MemoryStore({ clock: () => 1_700_000_000_000 })
    const global = new RateLimiter({ rules: counter(10), store })
    const login = new RateLimiter({ rules: counter(3), store })
    expect(global.namespace).not.toBe(login.namespace)
    for (let i = 0; i < 3; i++) await global.limit('client')
    expect((await login.limit('client')).remaining).toBe(2)
  })

  it('lets a second limiter with the same rules on the same store take the namespace over; the first warns once if it still decides', async () => {
    const store = new MemoryStore({ clock: () => 1_700_000_000_000 })
    const first = new RateLimiter({ rules: counter(5), store })
    const second = new RateLimiter({ rules: counter(5), store })
    expect(first.superseded).toBe(true)
    expect(second.superseded).toBe(false)
    const warnings = await warningsOf(async () => {
      await second.limit('client')
      await first.limit('client')
      await first.limit('client')
    })
    expect(warnings).toEqual([
      expect.objectContaining({
        code: 'RATEWINDOW_SUPERSEDED_LIMITER',
        message: expect.stringMatching(/superseded.*`close\(\)`.*own `prefix`.*same `group`/s),
      }),
    ])
    // One namespace, one count: the three decisions counted together.
    expect((await second.peek('client')).remaining).toBe(2) // 5 − 3: peek counts no request of its own
    expect(new RateLimiter({ rules: counter(5), store, prefix: 'other' }).superseded).toBe(false)
  })

  it('never warns for a limiter released before its successor was built', async () => {
    const store = new MemoryStore()
    const first = new RateLimiter({ rules: counter(5), store })
    first.release()
    new RateLimiter({ rules: counter(5), store })
    expect(first.superseded).toBe(false)
    expect(await warningsOf(() => first.limit('client'))).toEqual([])
  })

  it('keeps two RedisStore objects with one prefix sharing a budget (claims are per store object)', () => {
    const client = new Redis({ lazyConnect: true })
    const a = new RateLimiter({ rules: counter(5), store: new RedisStore({ client, prefix: 'app:' }) })
    const b = new RateLimiter({ rules: counter(5), store: new RedisStore({ client, prefix: 'app:' }) })
    expect(a.namespace).toBe(b.namespace)
    expect(a.superseded || b.superseded).toBe(false)
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

  it('refuses a group member whose window differs, at construction (regression: 10 + 10 admitted against one budget of 10)', async () => {
    const store = new MemoryStore({ clock: () => 1_700_000_000_000 })
    const hourly = new RateLimiter({ rules: windowed(10, '1h'), store, group: 'password' })
    let quarterly: RateLimiter | undefined
    let refusal: unknown
    try {
      quarterly = new RateLimiter({ rules: windowed(10, '15m'), store, group: 'password' })
    } catch (error) {
      refusal = error
    }
    let admitted = 0
    for (const limiter of [hourly, quarterly])
      for (let i = 0; i < 10; i++) if ((await limiter?.limit('client'))?.allowed) admitted++
    expect(admitted).toBe(10)
    expect(refusal).toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      option: 'group',
      message: expect.stringMatching(
        /`group` 'password' already counts on this store with sliding-window-counter 10 per 1h; this limiter has sliding-window-counter 10 per 15m.*same rules.*`close\(\)`/s,
      ),
    })
  })

  it('refuses a group member with another limit or algorithm too; an unknown group name as before', () => {
    const store = new MemoryStore()
    new RateLimiter({ rules: counter(3), store, group: 'login' })
    expect(() => new RateLimiter({ rules: counter(4), store, group: 'login' })).toThrow(
      expect.objectContaining({ option: 'group', message: expect.stringContaining('counter 4 per 1m') }),
    )
    expect(
      () => new RateLimiter({ rules: fixedWindow({ limit: 3, window: '1m' }), store, group: 'login' }),
    ).toThrow(expect.objectContaining({ option: 'group' }))
    expect(() => new RateLimiter({ rules: counter(3), group: 'a group' })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'group' }),
    )
  })

  it('lets a group change its rules once every older member was released (an app rebuilt with new limits)', async () => {
    const store = new MemoryStore()
    const old = new RateLimiter({ rules: counter(3), store, group: 'login' })
    const member = new RateLimiter({ rules: counter(3), store, group: 'login' })
    old.release()
    expect(() => new RateLimiter({ rules: counter(4), store, group: 'login' })).toThrow()
    member.release()
    const changed = new RateLimiter({ rules: counter(4), store, group: 'login' })
    expect([old.superseded, member.superseded, changed.superseded]).toEqual([false, false, false])
    expect(await warningsOf(() => old.limit('client'))).toEqual([])
    // Other store objects are not compared: each holds its own claims.
    expect(new RateLimiter({ rules: counter(5), store: new MemoryStore(), group: 'login' }).group).toBe(
      'login',
    )
  })

  it('warns once per namespace of a store, however many limiters were superseded there (regression: 999 warnings for 1,000)', async () => {
    const store = new MemoryStore()
    const limiters = Array.from({ length: 1_000 }, () => new RateLimiter({ rules: counter(5), store }))
    const warnings = await warningsOf(async () => {
      for (const limiter of limiters) await limiter.limit('client')
    })
    expect(warnings.map((warning) => warning.code)).toEqual(['RATEWINDOW_SUPERSEDED_LIMITER'])
    expect(warnings[0]!.message).toMatch(/built inside a request handler, build it once/)
  })

  it('works without WeakRef and FinalizationRegistry (Workers before compatibility date 2025-05-05): builds, decides, shares, supersedes, releases', async () => {
    const globals = globalThis as { WeakRef?: unknown; FinalizationRegistry?: unknown }
    const { WeakRef: weakRef, FinalizationRegistry: registry } = globals
    delete globals.WeakRef
    delete globals.FinalizationRegistry
    try {
      const store = new MemoryStore({ clock: () => 1_700_000_000_000 })
      const first = new RateLimiter({ rules: counter(2), store })
      const second = new RateLimiter({ rules: counter(2), store })
      expect([first.superseded, second.superseded]).toEqual([true, false])
      const a = new RateLimiter({ rules: counter(2), store, group: 'g' })
      const b = new RateLimiter({ rules: counter(2), store, group: 'g' })
      const answers = [await a.limit('k'), await b.limit('k'), await a.limit('k')]
      expect(answers.map((answer) => answer.allowed)).toEqual([true, true, false])
      a.release()
      b.release()
      expect(new RateLimiter({ rules: counter(3), store, group: 'g' }).namespace).toBe('rw:g=g:')
    } finally {
      globals.WeakRef = weakRef
      globals.FinalizationRegistry = registry
    }
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

describe('numbers after peek and settle (issue 20)', () => {
  it('peek().remaining is the units free now, the same as a cost-0 peek, whatever the cost asked', async () => {
    for (const rule of [
      fixedWindow({ limit: 5, window: '1m' }),
      slidingWindowLog({ limit: 5, window: '1m' }),
      counter(5),
      tokenBucket({ capacity: 5, refillRate: 1, interval: '1m' }),
    ]) {
      const limiter = new RateLimiter({
        rules: rule,
        store: new MemoryStore({ clock: () => 1_700_000_000_000 }),
      })
      await limiter.limit('k', { cost: 2 })
      expect((await limiter.peek('k')).remaining, rule.algorithm).toBe(3)
      expect((await limiter.peek('k', { cost: 3 })).remaining, rule.algorithm).toBe(3)
      expect((await limiter.peek('k', { cost: 0 })).remaining, rule.algorithm).toBe(3)
      expect((await limiter.limit('k')).remaining, rule.algorithm).toBe(2) // a limit() still reports after itself
    }
  })

  it('after settle, result.remaining (and each rule remaining) follows what was given back or charged', async () => {
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 100, window: '1h' }),
      store: new MemoryStore(),
    })
    const result = await limiter.limit('k', { cost: 10 })
    expect(result.remaining).toBe(90)
    await limiter.settle(result, 4)
    expect([result.remaining, result.rules[0]!.remaining]).toEqual([96, 96])
    expect((await limiter.peek('k')).remaining).toBe(result.remaining)
    await limiter.settle(result, 30)
    expect([result.remaining, result.rules[0]!.remaining]).toEqual([70, 70])
    expect((await limiter.peek('k')).remaining).toBe(result.remaining)
  })
})
