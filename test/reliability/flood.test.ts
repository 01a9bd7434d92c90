import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { MemoryStore, RateLimiter, slidingWindowCounter, slidingWindowLog } from '@ratewindow/core'
import { describe, expect, it } from 'vitest'
import { until } from '../support/connections.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** Heap still in use after a full collection: what the store retains, not garbage waiting to be swept. */
function retainedHeap(): number {
  gc()
  return process.memoryUsage().heapUsed
}

describe('floods of distinct keys', () => {
  it('1,000,000 distinct keys stay within maxKeys and a bounded heap', async () => {
    const store = new MemoryStore({ maxKeys: 100_000 })
    const limiter = new RateLimiter({
      rules: [
        slidingWindowCounter({ limit: 100, window: '1h' }),
        slidingWindowLog({ limit: 5, window: '1m' }),
      ],
      store,
    })
    const before = retainedHeap()
    let peak = 0
    for (let i = 0; i < 1_000_000; i++) {
      await limiter.limit(`attacker-${i}`)
      if (i % 250_000 === 249_999) peak = Math.max(peak, retainedHeap() - before)
    }
    expect(store.size).toBe(100_000)
    // Stated bound (docs/operations.md): under 1 KB per key held, with two rules (counter + a log of 5).
    expect(peak).toBeLessThan(100_000 * 1_024)
    // The most recent keys are the ones kept.
    expect((await limiter.peek('attacker-999999', { cost: 0 })).rules[1]!.remaining).toBe(4)
    store.close()
  })

  it('the background sweep drops expired keys in slices', async () => {
    let now = 0
    const store = new MemoryStore({ clock: () => now, sweepInterval: 10 })
    const limiter = new RateLimiter({ rules: slidingWindowCounter({ limit: 5, window: '1s' }), store })
    for (let i = 0; i < 12_000; i++) await limiter.limit(`k${i}`)
    now = 10_000
    await until(
      () => store.size === 0,
      () => `the sweep drops every expired key (${store.size} left)`,
      {
        every: 20,
      },
    )
    expect(store.size).toBe(0)
    store.close()
  })
})
