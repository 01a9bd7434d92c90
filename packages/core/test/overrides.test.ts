import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  fixedWindow,
  gcra,
  MemoryStore,
  type OverrideEvent,
  type RateLimitError,
  RateLimiter,
  type RateLimiterOptions,
  type Store,
  tokenBucket,
} from '../src/index.js'
import { rejection } from './support/rejection.js'

const START = 1_700_000_000_000

function operated(rules: RateLimiterOptions['rules'], clock = { now: START }) {
  const store = new MemoryStore({ clock: () => clock.now })
  return { clock, store, limiter: new RateLimiter({ rules, store, overrides: true }) }
}

describe('overrides: options and validation', () => {
  it('`overrides` is a boolean, and true only with a store that keeps overrides (the error names the store)', () => {
    const rules = fixedWindow({ limit: 1, window: '1s' })
    expect(() => new RateLimiter({ rules, overrides: 'yes' as never })).toThrow(
      /`overrides` must be true or false/,
    )
    class PlainStore {
      consume = () => ({ allowed: true, now: 0, outcomes: [{ remaining: 0, reset: 0, retryAfter: 0 }] })
      peek = this.consume
      refund() {}
      reset() {}
    }
    const error = (() => {
      try {
        new RateLimiter({ rules, store: new PlainStore() as Store, overrides: true })
      } catch (caught) {
        return caught as RateLimitError
      }
    })()
    expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'overrides' })
    expect(error?.message).toContain('PlainStore')
  })

  it('refuses keys over 128 characters, a non-integer `until`, a `rules` that is not an object, and a bad reason', async () => {
    const { limiter } = operated(fixedWindow({ limit: 1, window: '1s' }))
    expect(await rejection(() => limiter.overrides.set('k'.repeat(129), { limit: 2 }))).toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_KEY',
    })
    expect(await rejection(() => limiter.overrides.set('k', { limit: 2, until: 1.5 }))).toMatchObject({
      option: 'override.until',
    })
    expect(await rejection(() => limiter.overrides.set('k', { rules: [] as never }))).toMatchObject({
      option: 'override.rules',
    })
    expect(await rejection(() => limiter.overrides.set('k', {}))).toMatchObject({ option: 'override' })
    expect(
      await rejection(() => limiter.overrides.block('k', { for: '1m', reason: 'x'.repeat(257) })),
    ).toMatchObject({ option: 'reason' })
    expect(await rejection(() => limiter.overrides.block('k', {} as never))).toMatchObject({ option: 'for' })
  })

  it('give on a store without `give` rejects naming the store, and changes nothing', async () => {
    const store = new MemoryStore()
    const plain: Store = {
      consume: (request) => store.consume(request),
      peek: (request) => store.peek(request),
      refund: (request) => store.refund(request),
      reset: (target) => store.reset(target),
    }
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1s' }), store: plain })
    const error = await rejection(() => limiter.overrides.give('k', 1))
    expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_STORE' })
    expect(error.message).toContain('`give`')
  })
})

describe('overrides: reading a record', () => {
  it('`record` reads the override and the block of a key as the store keeps them; `enabled` says whether it can', async () => {
    const { limiter } = operated(fixedWindow({ limit: 5, window: '1m' }))
    expect(limiter.overrides.enabled).toBe(true)
    expect(await limiter.overrides.record('k')).toBeUndefined()
    await limiter.overrides.set('k', { limit: 9 }, { ttl: '1h' })
    await limiter.overrides.block('k', { for: '1m', reason: 'r' })
    expect(await limiter.overrides.record('k')).toEqual({
      key: 'k',
      limits: { limit: 9, until: START + 3_600_000 },
      block: { until: START + 60_000, reason: 'r' },
    })
    const plain = new RateLimiter({ rules: fixedWindow({ limit: 5, window: '1m' }) })
    expect(plain.overrides.enabled).toBe(false)
    expect(limiter.overrides.limiter).toBe(limiter.name)
    expect(limiter.overrides.rules).toBe(limiter.rules)
    expect((await rejection(() => plain.overrides.record('k'))).code).toBe('ERR_RATEWINDOW_OVERRIDES_OFF')
  })
})

describe('overrides: reset through the handle', () => {
  it('`reset` forgets the counters as the limiter does, and keeps the override and the block', async () => {
    const { limiter } = operated(fixedWindow({ limit: 2, window: '1m' }))
    await limiter.limit('k')
    await limiter.limit('k')
    await limiter.overrides.set('k', { limit: 3 })
    expect((await limiter.overrides.inspect('k')).rules[0]).toMatchObject({ used: 2, limit: 3 })
    await limiter.overrides.reset('k')
    expect((await limiter.overrides.inspect('k')).rules[0]).toMatchObject({ used: 0, limit: 3 })
    await limiter.overrides.block('k', { for: '1m' })
    await limiter.overrides.reset('k')
    expect((await limiter.limit('k')).manualBlock).toBeDefined()
  })
})

describe('overrides: the rules in force', () => {
  it('GCRA and the token bucket: the burst scales with the rate unless given', async () => {
    const { limiter } = operated([
      gcra({ limit: 10, window: '1s', burst: 20, name: 'g' }),
      tokenBucket({ capacity: 30, refillRate: 10, interval: '1s', name: 't' }),
    ])
    await limiter.overrides.set('k', { limit: 20 })
    expect((await limiter.limit('k')).rules.map((each) => each.rule.limit)).toEqual([40, 60])
    await limiter.overrides.set('k', { limit: 20, burst: 5 })
    expect((await limiter.limit('k')).rules.map((each) => each.rule.limit)).toEqual([5, 5])
  })

  it('a custom policy name stays; a default one follows the limit in force', async () => {
    const { limiter } = operated([
      fixedWindow({ limit: 5, window: '1m' }),
      fixedWindow({ limit: 50, window: '1h', name: 'hourly' }),
    ])
    await limiter.overrides.set('k', { limit: 500 })
    expect((await limiter.limit('k')).rules.map((each) => each.rule.name)).toEqual(['500-per-1m', 'hourly'])
  })

  it('GCRA and token bucket conversions never admit more than the new burst leaves, and at most one unit less', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('gcra', 'token-bucket'),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 4_000 }),
        async (algorithm, limit, newLimit, burstLimit, used, window) => {
          const burst = Math.max(limit, burstLimit)
          const rule =
            algorithm === 'gcra'
              ? gcra({ limit, window, burst })
              : tokenBucket({ capacity: burst, refillRate: limit, interval: window })
          const { limiter } = operated(rule)
          let spent = 0
          for (let i = 0; i < used; i++) if ((await limiter.limit('k')).allowed) spent++
          const newBurst = Math.max(1, Math.floor((burst * newLimit) / limit))
          await limiter.overrides.set('k', { limit: newLimit })
          let admitted = 0
          while (admitted <= newBurst && (await limiter.limit('k')).allowed) admitted++
          expect(admitted).toBeLessThanOrEqual(Math.max(0, newBurst - spent))
          expect(admitted).toBeGreaterThanOrEqual(Math.max(0, newBurst - spent - 1))
        },
      ),
      { numRuns: 300 },
    )
  })
})

describe('overrides: events', () => {
  it('onOverride hears every change and manual action, with the record as the store keeps it', async () => {
    const events: OverrideEvent[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store: new MemoryStore({ clock: () => START }),
      name: 'api',
      overrides: true,
      observer: { onOverride: (event) => void events.push(event) },
    })
    await limiter.overrides.set('k', { limit: 9 })
    await limiter.overrides.block('k', { for: '1m', reason: 'r' })
    await limiter.overrides.unblock('k')
    await limiter.overrides.delete('k')
    await limiter.overrides.take('k', 2)
    await limiter.overrides.give('k', 1)
    expect(events.map(({ action, units }) => [action, units])).toEqual([
      ['set', undefined],
      ['block', undefined],
      ['unblock', undefined],
      ['delete', undefined],
      ['take', 2],
      ['give', 1],
    ])
    expect(events[1]).toMatchObject({
      limiter: 'api',
      key: 'k',
      block: { until: START + 60_000, reason: 'r' },
      record: { key: 'k', limits: { limit: 9 }, block: { until: START + 60_000, reason: 'r' } },
    })
    expect(events[3]!.record).toBeUndefined()
    expect(events.some((event) => 'actor' in event)).toBe(false)
  })

  it('the actor option of set, delete, block and unblock reaches the event, and is validated', async () => {
    const events: OverrideEvent[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store: new MemoryStore({ clock: () => START }),
      overrides: true,
      observer: { onOverride: (event) => void events.push(event) },
    })
    await limiter.overrides.set('k', { limit: 9 }, { actor: 'ana' })
    await limiter.overrides.block('k', { for: '1m', actor: 'bo' })
    await limiter.overrides.unblock('k', { actor: 'cy' })
    await limiter.overrides.delete('k', { actor: 'di' })
    expect(events.map(({ action, actor }) => [action, actor])).toEqual([
      ['set', 'ana'],
      ['block', 'bo'],
      ['unblock', 'cy'],
      ['delete', 'di'],
    ])
    await expect(limiter.overrides.unblock('k', { actor: 'x'.repeat(257) })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      option: 'actor',
    })
    await expect(limiter.overrides.delete('k', { who: 'x' } as never)).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_UNKNOWN_OPTION',
    })
    expect(events).toHaveLength(4)
  })
})
