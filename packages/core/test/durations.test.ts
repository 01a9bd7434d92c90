import { describe, expect, it } from 'vitest'
import { fixedWindow, MemoryStore, RateLimiter } from '../src/index.js'

const rules = fixedWindow({ limit: 1, window: '1m' })

describe('durations that drive timers', () => {
  it.each([
    ['timeout', '25d', () => new RateLimiter({ rules, timeout: '25d' })],
    ['timeout', 2 ** 31, () => new RateLimiter({ rules, timeout: 2 ** 31 })],
    ['sweepInterval', '30d', () => new MemoryStore({ sweepInterval: '30d' })],
  ])('`%s: %s` is refused at construction, naming the option', (option, _value, make) => {
    expect(make).toThrow(
      expect.objectContaining({
        code: 'ERR_RATEWINDOW_INVALID_WINDOW',
        option,
        message: expect.stringContaining('at most 2147483647 ms'),
      }),
    )
  })

  it('the longest a timer can wait is accepted, and a window may be longer (it drives no timer)', async () => {
    const store = new MemoryStore({ sweepInterval: 2 ** 31 - 1 })
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '30d' }),
      store,
      timeout: '24d',
    })
    expect((await limiter.limit('k')).allowed).toBe(true)
    expect((await limiter.limit('k')).allowed).toBe(false)
    store.close()
  })
})
