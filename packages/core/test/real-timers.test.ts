/**
 * REAL_TIMERS (time/real-timers.ts): the platform's timers as one object, called as its methods.
 */
import { afterEach, describe, expect, it, vi } from 'vitest'

afterEach(() => {
  vi.unstubAllGlobals()
  vi.resetModules()
})

describe('REAL_TIMERS', () => {
  it('clears a timer on a platform whose clearTimeout refuses another `this` (workerd: Illegal invocation), so store calls answer before their timeout', async () => {
    const platform = globalThis.clearTimeout
    vi.stubGlobal('clearTimeout', function strict(this: unknown, timer?: Parameters<typeof clearTimeout>[0]) {
      if (this !== undefined && this !== globalThis) throw new TypeError('Illegal invocation')
      platform(timer)
    })
    vi.resetModules()
    const { REAL_TIMERS } = await import('../src/time/real-timers.js')
    let fired = false
    const timer = REAL_TIMERS.setTimeout(() => {
      fired = true
    }, 20)
    expect(() => REAL_TIMERS.clearTimeout(timer)).not.toThrow()
    await new Promise((resolve) => setTimeout(resolve, 60))
    expect(fired).toBe(false)
  })
})
