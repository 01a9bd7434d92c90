import * as core from '@ratewindow/core'
import { HttpRateLimiter } from '@ratewindow/core/adapter'
import { describe, expect, it } from 'vitest'
import before from './fixtures/result-shapes-41bbd39.json' with { type: 'json' }
import { type CoreModule, resultShapes } from './result-shapes.js'

describe('results built once and settled in place', () => {
  it("serialise and spread as 41bbd39's did, for every kind of result", async () => {
    const shapes = await resultShapes({ ...core, HttpRateLimiter } as unknown as CoreModule)
    expect(Object.keys(shapes)).toEqual(Object.keys(before))
    for (const [name, shape] of Object.entries(shapes))
      expect(shape, name).toEqual(before[name as keyof typeof before])
  })

  it('settle a limiter’s result in place, as the limiter does', async () => {
    const limiter = new core.RateLimiter({ rules: core.slidingWindowCounter({ limit: 10, window: '1m' }) })
    const result = await limiter.limit('k', { cost: 5 })
    expect(result.remaining).toBe(5)
    await expect(result.settle!(2)).resolves.toEqual({ charged: 0, refunded: 3, uncharged: 0 })
    expect(result.cost).toBe(2)
    expect(result.remaining).toBe(8)
    expect((await limiter.peek('k')).remaining).toBe(8)
  })
})
