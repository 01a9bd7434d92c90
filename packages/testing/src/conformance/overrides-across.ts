/**
 * The overrides section's test of processes sharing one store (`StoreUnderTest.createProcess`): two see an
 * override, its end and a block set by a third, at their next decision or within the bound the store declares
 * (`seenWithin`).
 */
import { fixedWindow, RateLimiter, type RateLimiterOptions, type Rule } from '@ratewindow/core'
import type { Setup, SuiteContext } from './context.js'

/** The section's limiter with `overrides: true` on the store under test; undefined for a store without them. */
export type Operating = (
  rules: Rule | Rule[],
  more?: Partial<RateLimiterOptions>,
) => Promise<Setup | undefined>

export function describeAcrossProcesses(suite: SuiteContext, operating: Operating): void {
  const { expect, it, subject } = suite
  const seen = subject.seenWithin?.bound ?? 'at their next decision'
  const across =
    subject.createProcess === undefined
      ? 'processes sharing the store: no `createProcess` given (one process), nothing to check'
      : `processes sharing the store see an override, its end and a block set by a third, ${seen}`
  it(across, async () => {
    const rule = fixedWindow({ limit: 50, window: '1h' })
    const given = await operating(rule, { name: 'api' })
    const { createProcess, seenWithin } = subject
    if (given === undefined || createProcess === undefined) return
    const { clock, limiter: operator } = given
    const processes: RateLimiter[] = []
    for (let i = 0; i < 2; i++) {
      const store = await createProcess(clock)
      processes.push(
        new RateLimiter({
          rules: rule,
          store,
          prefix: operator.prefix,
          timeout: '30s',
          overrides: true,
          name: 'api',
        }),
      )
    }
    /** Each process decides the key, is brought to the store's bound, and decides it again: those decisions. */
    const decide = async () => {
      for (const each of processes) await each.limit('k')
      for (const each of processes) await seenWithin?.reach(each.store)
      return Promise.all(processes.map((each) => each.limit('k')))
    }
    expect((await decide()).map((result) => result.limit)).toEqual([50, 50])
    await operator.overrides.set('k', { limit: 200 }, { ttl: '10s' })
    for (const result of await decide()) expect(result).toMatchObject({ overridden: true, limit: 200 })
    // It ends on the store's clock, to the millisecond, with no change to see.
    clock.advance(9_999)
    for (const each of processes) expect(await each.limit('k')).toMatchObject({ limit: 200 })
    clock.advance(1)
    for (const each of processes) expect(await each.limit('k')).toMatchObject({ allowed: true, limit: 50 })
    await operator.overrides.block('k', { for: '1m', reason: 'incident' })
    for (const result of await decide())
      expect(result).toMatchObject({ allowed: false, manualBlock: { reason: 'incident' } })
    await operator.overrides.unblock('k')
    for (const result of await decide()) expect(result).toMatchObject({ allowed: true, limit: 50 })
  })
}
