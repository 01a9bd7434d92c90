/** Issue 35, item 4: near-limit signals, once per key and rule window in a process, from a bounded memory. */
import { describe, expect, it } from 'vitest'
import {
  type DecisionEvent,
  fixedWindow,
  gcra,
  MemoryStore,
  quota,
  RateLimitError,
  RateLimiter,
  type RateLimiterOptions,
  type RateLimitResult,
  tokenBucket,
} from '../src/index.js'
import { NearLimitSignals } from '../src/limiter/near-limit.js'

const START = 1_700_000_000_000 // a multiple of 10 s: fixed windows start here

function watched(options: Partial<RateLimiterOptions> = {}) {
  const clock = { now: START }
  const events: DecisionEvent[] = []
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 10, window: '10s', name: 'per-10s' }),
    store: new MemoryStore({ clock: () => clock.now }),
    observer: { onDecision: (event) => events.push(event) },
    ...options,
  })
  /** The `nearLimit` of the next `n` decisions for `key`. */
  const signals = async (key: string, n: number) => {
    const from = events.length
    for (let i = 0; i < n; i++) await limiter.limit(key)
    return events.slice(from).map((event) => event.nearLimit)
  }
  return { clock, limiter, signals }
}

describe('nearLimit', () => {
  it('signals once when a key reaches 80 % of its limit, not on the decisions after, nor on refusals', async () => {
    const { signals } = watched()
    const seen = await signals('alice', 12)
    expect(seen.slice(0, 7)).toEqual(Array(7).fill(undefined))
    expect(seen[7]).toEqual({ rule: 'per-10s', limit: 10, remaining: 2 })
    expect(seen.slice(8)).toEqual(Array(4).fill(undefined))
  })

  it('signals again in the next window, and for each key on its own', async () => {
    const { clock, signals } = watched()
    expect((await signals('alice', 8)).filter(Boolean)).toHaveLength(1)
    expect((await signals('bob', 8)).filter(Boolean)).toHaveLength(1)
    clock.now += 10_000
    expect((await signals('alice', 8)).filter(Boolean)).toHaveLength(1)
  })

  it('takes the share from the option, and is off with false', async () => {
    const half = watched({ nearLimit: 0.5 })
    expect((await half.signals('alice', 5))[4]).toEqual({ rule: 'per-10s', limit: 10, remaining: 5 })
    const off = watched({ nearLimit: false })
    expect((await off.signals('alice', 10)).filter(Boolean)).toEqual([])
  })

  it('refuses a share outside (0, 1] at construction, naming the option', () => {
    for (const bad of [0, 1.5, -0.2, Number.NaN, '0.8', true]) {
      const construct = () => watched({ nearLimit: bad as never })
      expect(construct).toThrow(RateLimitError)
      expect(construct).toThrow(/`nearLimit`/)
    }
  })

  it('remembers at most maxKeys signalled keys: the oldest forgotten may signal again (documented)', async () => {
    const clock = { now: START }
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '10s' }),
      store: new MemoryStore({ clock: () => clock.now }),
    })
    const signals = new NearLimitSignals(0.8, 2)
    const results = new Map<string, RateLimitResult>()
    /** Whether an admitted decision for `key` (its limit of 1 used, so 100 %) signals. */
    const near = async (key: string) => {
      if (!results.has(key)) results.set(key, await limiter.limit(key))
      const event = { outcome: 'allowed', result: results.get(key) } as DecisionEvent
      signals.mark(event)
      return event.nearLimit !== undefined
    }
    expect([await near('a'), await near('b'), await near('a')]).toEqual([true, true, false])
    expect(await near('c')).toBe(true) // forgets a, the oldest signal
    expect([await near('b'), await near('a')]).toEqual([false, true])
  })
})

// Issue 47, item 5: soft limits. A rule's `warnAt` signals at its own share, once per key and window (a quota's:
// its period), even where the limiter's `nearLimit` is off; the other rules keep the limiter's share.
describe('soft limits (warnAt)', () => {
  it("a quota's warnAt signals once per key and period; the limiter's nearLimit off does not silence it", async () => {
    const clock = { now: Date.parse('2026-03-10T12:00:00Z') }
    const events: DecisionEvent[] = []
    const limiter = new RateLimiter({
      rules: [
        fixedWindow({ limit: 100, window: '10s', name: 'per-10s' }),
        quota({ limit: 10, period: 'month', name: 'monthly', warnAt: 0.5 }),
      ],
      store: new MemoryStore({ clock: () => clock.now, maxKeys: 100 }),
      nearLimit: false,
      observer: { onDecision: (event) => events.push(event) },
    })
    for (let i = 0; i < 8; i++) await limiter.limit('acme')
    expect(events.map((event) => event.nearLimit).filter(Boolean)).toEqual([
      { rule: 'monthly', limit: 10, remaining: 5 },
    ])
    // The next period: once again.
    clock.now = Date.parse('2026-04-01T00:00:00Z')
    for (let i = 0; i < 6; i++) await limiter.limit('acme')
    expect(events.map((event) => event.nearLimit).filter(Boolean)).toHaveLength(2)
  })

  it('names the option of a share that is not one', () => {
    for (const warnAt of [0, 1, 1.5, -0.2, '0.8', Number.NaN])
      expect(() => fixedWindow({ limit: 5, window: '1m', warnAt: warnAt as number })).toThrow(/`warnAt`/)
    expect(() => quota({ limit: 5, period: 'day', warnAt: 2 })).toThrow(/`warnAt`/)
    expect(() => tokenBucket({ capacity: 5, refillRate: 1, warnAt: 0 })).toThrow(/`warnAt`/)
    expect(() => gcra({ limit: 5, window: '1m', warnAt: 1 })).toThrow(/`warnAt`/)
    expect(gcra({ limit: 5, window: '1m', warnAt: 0.9 }).warnAt).toBe(0.9)
  })

  it("an override keeps the rule's warnAt", async () => {
    const limiter = new RateLimiter({
      rules: quota({ limit: 10, period: 'month', name: 'monthly', warnAt: 0.8 }),
      store: new MemoryStore({ maxKeys: 100 }),
      overrides: true,
    })
    await limiter.operator.set('acme', { limit: 100 })
    const result = await limiter.limit('acme')
    expect(result.rules[0]!.rule).toMatchObject({ limit: 100, warnAt: 0.8 })
  })
})

// New-user trial: a per-minute rule and a monthly quota crossing their shares in one decision signalled only the
// first; the quota's signal came a decision late, or never.
describe('several rules near their limits in one decision', () => {
  it('signals each, once: nearLimits lists them, nearLimit is the first', async () => {
    const events: DecisionEvent[] = []
    const limiter = new RateLimiter({
      rules: [
        fixedWindow({ limit: 10, window: '1m', name: 'per-minute' }),
        quota({ limit: 10, period: 'month', name: 'monthly' }),
      ],
      store: new MemoryStore({ clock: () => Date.parse('2026-03-10T12:00:00Z'), maxKeys: 100 }),
      observer: { onDecision: (event) => events.push(event) },
    })
    await limiter.limit('acme', { cost: 9 })
    expect(events[0]!.nearLimits).toEqual([
      { rule: 'per-minute', limit: 10, remaining: 1 },
      { rule: 'monthly', limit: 10, remaining: 1 },
    ])
    expect(events[0]!.nearLimit).toEqual({ rule: 'per-minute', limit: 10, remaining: 1 })
    await limiter.limit('acme')
    expect(events[1]!.nearLimits).toBeUndefined()
  })
})
