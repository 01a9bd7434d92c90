import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  fixedWindow,
  MemoryStore,
  RateLimiter,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
} from '../src/index.js'

/** The most admitted in any half-open window (t − W, t], for a random cost-1 trace. */
async function worstWindow(rule: Rule, delays: number[]): Promise<number> {
  let now = 1_000_000
  const limiter = new RateLimiter({ rules: rule, store: new MemoryStore({ clock: () => now }) })
  const admitted: number[] = []
  for (const delay of delays) {
    now += delay
    if ((await limiter.limit('k')).allowed) admitted.push(now)
  }
  let worst = 0
  for (const end of admitted)
    worst = Math.max(worst, admitted.filter((t) => t > end - rule.windowMs && t <= end).length)
  return worst
}

const traces = fc.tuple(
  fc.integer({ min: 1, max: 20 }),
  fc.integer({ min: 20, max: 1_000 }),
  fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 1_500 })), {
    maxLength: 200,
  }),
)

describe('accuracy bounds over random traces', () => {
  it('sliding window log: never more than limit in any window', async () => {
    await fc.assert(
      fc.asyncProperty(traces, async ([limit, window, delays]) => {
        expect(await worstWindow(slidingWindowLog({ limit, window }), delays)).toBeLessThanOrEqual(limit)
      }),
    )
  })

  it('sliding window counter: always below 2 × limit in any window (limit + prev × elapsed / W)', async () => {
    await fc.assert(
      fc.asyncProperty(traces, async ([limit, window, delays]) => {
        expect(await worstWindow(slidingWindowCounter({ limit, window }), delays)).toBeLessThan(
          Math.max(2 * limit, 2),
        )
      }),
    )
  })

  it('fixed window: at most 2 × limit in any window', async () => {
    await fc.assert(
      fc.asyncProperty(traces, async ([limit, window, delays]) => {
        expect(await worstWindow(fixedWindow({ limit, window }), delays)).toBeLessThanOrEqual(2 * limit)
      }),
    )
  })
})
