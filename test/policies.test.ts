import { fixedWindow, gcra, MemoryStore, RateLimitError, RateLimiter, type Store } from '@ratewindow/core'
import { describe, expect, it } from 'vitest'

const rules = fixedWindow({ limit: 2, window: '1s' })

function codeOf(run: () => unknown): { code: string; option: string | undefined } {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitError)
    const { code, option } = error as RateLimitError
    return { code, option }
  }
  throw new Error('expected a RateLimitError')
}

describe('gcra: bad parameters are refused at construction, naming the option', () => {
  it.each([
    [{ limit: 0, window: '1s' }, 'limit'],
    [{ limit: 10, window: 'soon' }, 'window'],
    [{ limit: 10, window: '1s', burst: 1.5 }, 'burst'],
    // 1777 per second: 1000/1777 ms has a denominator too large to stay exact in doubles.
    [{ limit: 1_777, window: '1s' }, 'limit'],
  ])('%j → %s', (options, option) => {
    expect(codeOf(() => gcra(options as never)).option).toBe(option)
  })

  it('reports its burst as the limit and the time to rest from a full burst as the window', () => {
    const rule = gcra({ limit: 10, window: '1s', burst: 20 })
    expect(rule).toMatchObject({ algorithm: 'gcra', limit: 20, windowMs: 2_000, name: '10-per-1s' })
  })
})

describe('penalty: bad options are refused at construction, naming the option', () => {
  it.each([
    [{ after: 0, within: '1s', block: '1s' }, 'penalty.after'],
    [{ after: 2, within: 'x', block: '1s' }, 'penalty.within'],
    [{ after: 2, within: '1s', block: -1 }, 'penalty.block'],
    [{ after: 2, within: '1s', block: '1s', factor: 1.5 }, 'penalty.factor'],
    [{ after: 2, within: '1s', block: '1m', maxBlock: '1s' }, 'penalty.maxBlock'],
    [{ after: 2, within: '1s', block: '1s', statusCode: 200 }, 'penalty.statusCode'],
  ])('%j → %s', (penalty, option) => {
    expect(codeOf(() => new RateLimiter({ rules, penalty: penalty as never })).option).toBe(option)
  })

  it('is refused with a store that cannot keep it atomically (a custom store, the fallback too)', () => {
    const custom: Store = {
      consume: () => Promise.reject(new Error('x')),
      peek: () => Promise.reject(new Error('x')),
      refund: () => undefined,
      reset: () => undefined,
    }
    const penalty = { after: 2, within: '1s', block: '1s' } as const
    expect(codeOf(() => new RateLimiter({ rules, penalty, store: custom })).option).toBe('penalty')
    expect(
      codeOf(() => new RateLimiter({ rules, penalty, store: new MemoryStore(), fallback: custom })).option,
    ).toBe('penalty')
  })
})
