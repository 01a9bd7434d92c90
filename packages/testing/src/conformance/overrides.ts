/**
 * Overrides, manual blocks, give/take and inspect, for a store with `overrides: true`: read by the
 * decision itself, ended on the store's clock, never lifted by `reset`, scoped per limiter, never admitting more
 * than the limit in force.
 */
import {
  fixedWindow,
  gcra,
  RateLimiter,
  type RateLimiterOptions,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { MINUTE, type Setup, type SuiteContext } from './context.js'
import { describeAcrossProcesses } from './overrides-across.js'

/** 20 s into a minute. */
const START = 1_700_000_000_000

export function describeOverrides(suite: SuiteContext): void {
  const { describe, each, expect, it, setup, subject } = suite
  describe(`${subject.name}: overrides, blocks, give/take and inspect`, () => {
    /** A limiter with `overrides: true` on the store under test; undefined for a store without overrides. */
    async function operating(
      rules: Rule | Rule[],
      more: Partial<RateLimiterOptions> = {},
    ): Promise<Setup | undefined> {
      const { clock, store } = await setup(fixedWindow({ limit: 1, window: '1s' }), START)
      if (subject.overrides === true) expect(store.overrides).toBe(true)
      if (store.overrides !== true) return undefined
      const limiter = new RateLimiter({
        rules,
        store,
        prefix: `o${Math.random().toString(36).slice(2, 10)}`,
        timeout: '30s',
        overrides: true,
        ...more,
      })
      return { clock, store, limiter }
    }
    const admitted = async (limiter: RateLimiter, key: string, times: number) => {
      let count = 0
      for (let i = 0; i < times; i++) if ((await limiter.limit(key)).allowed) count++
      return count
    }

    it('a raised limit applies at once to the current window, and shows in result.limit and the rule', async () => {
      const given = await operating(fixedWindow({ limit: 2, window: '1m' }))
      if (given === undefined) return
      const { limiter } = given
      expect(await admitted(limiter, 'k', 3)).toBe(2)
      await limiter.overrides.set('k', { limit: 5 })
      const result = await limiter.limit('k')
      expect(result).toMatchObject({ allowed: true, limit: 5, remaining: 2, overridden: true })
      expect(result.rule.limit).toBe(5)
      expect(await admitted(limiter, 'k', 5)).toBe(2)
      // Another key keeps the coded limit.
      expect(await limiter.limit('other')).toMatchObject({ limit: 2, remaining: 1 })
      expect((await limiter.limit('other')).overridden).toBeUndefined()
    })

    it('a lowered limit leaves remaining at 0, never negative, and erases nothing: deleting it restores the count', async () => {
      const given = await operating(fixedWindow({ limit: 10, window: '1m' }))
      if (given === undefined) return
      const { limiter } = given
      expect(await admitted(limiter, 'k', 6)).toBe(6)
      await limiter.overrides.set('k', { limit: 3 })
      expect(await limiter.limit('k')).toMatchObject({ allowed: false, limit: 3, remaining: 0 })
      expect(await limiter.overrides.get('k')).toEqual({ limit: 3 })
      // `inspect` tells what is counted, above the lowered limit (it showed 3).
      expect((await limiter.overrides.inspect('k')).rules[0]).toMatchObject({
        limit: 3,
        used: 6,
        remaining: 0,
      })
      await limiter.overrides.delete('k')
      expect(await limiter.overrides.get('k')).toBeUndefined()
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, limit: 10, remaining: 3 })
    })

    const rules: (readonly [string, () => Rule])[] = [
      ['fixed window', () => fixedWindow({ limit: 10, window: '1m' })],
      ['sliding window counter', () => slidingWindowCounter({ limit: 10, window: '1m' })],
      ['sliding window log', () => slidingWindowLog({ limit: 10, window: '1m' })],
      ['GCRA', () => gcra({ limit: 10, window: '1m' })],
      ['token bucket', () => tokenBucket({ capacity: 10, refillRate: 10, interval: '1m' })],
    ]
    each(rules)(
      '%s: lowered then raised, a key is never admitted beyond the limit in force',
      async (_label, make) => {
        const given = await operating(make())
        if (given === undefined) return
        const { clock, limiter } = given
        expect(await admitted(limiter, 'k', 6)).toBe(6)
        await limiter.overrides.set('k', { limit: 4 })
        expect(await limiter.limit('k')).toMatchObject({ allowed: false, remaining: 0, limit: 4 })
        await limiter.overrides.set('k', { limit: 20 })
        // 6 used of 20: 14 more, not one more.
        expect(await admitted(limiter, 'k', 20)).toBe(14)
        expect(await limiter.limit('k')).toMatchObject({ allowed: false, remaining: 0, limit: 20 })
        await limiter.overrides.delete('k')
        // Back to 10 with 20 used: nothing until the window (or the rate) frees them.
        expect(await limiter.limit('k')).toMatchObject({ allowed: false, remaining: 0, limit: 10 })
        clock.advance(2 * MINUTE + 1)
        expect((await limiter.limit('k')).allowed).toBe(true)
      },
    )

    it('an override names rules by policy name; unknown names, bursts on window rules and functions are refused', async () => {
      const given = await operating([
        fixedWindow({ limit: 5, window: '1s', name: 'second' }),
        gcra({ limit: 100, window: '1m', name: 'minute' }),
      ])
      if (given === undefined) return
      const { limiter } = given
      await limiter.overrides.set('k', { rules: { minute: { limit: 200, burst: 20 } } })
      const result = await limiter.limit('k')
      expect(result.rules[0]!.rule.limit).toBe(5)
      expect(result.rules[1]!.rule.limit).toBe(20)
      await expectCode(
        () => limiter.overrides.set('k', { rules: { hour: { limit: 1 } } }),
        'ERR_RATEWINDOW_INVALID_OPTION',
      )
      await expectCode(
        () => limiter.overrides.set('k', { limit: 10, burst: 10 }),
        'ERR_RATEWINDOW_INVALID_OPTION',
      )
      await expectCode(() => limiter.overrides.set('k', { limit: 0 }), 'ERR_RATEWINDOW_INVALID_LIMIT')
      await expectCode(() => limiter.overrides.set('k', (() => 5) as never), 'ERR_RATEWINDOW_INVALID_OPTION')
      await expectCode(
        () => limiter.overrides.set('k', { limit: 5, per: 'day' } as never),
        'ERR_RATEWINDOW_UNKNOWN_OPTION',
      )
    })

    it("an expiring override ends at its time to the millisecond on the store's clock", async () => {
      const given = await operating(fixedWindow({ limit: 1, window: '1h' }))
      if (given === undefined) return
      const { clock, limiter } = given
      await limiter.overrides.set('k', { limit: 100 }, { ttl: '10s' })
      clock.advance(9_999)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, limit: 100 })
      clock.advance(1)
      expect(await limiter.limit('k')).toMatchObject({ allowed: false, limit: 1 })
      expect(await limiter.overrides.get('k')).toBeUndefined()
      // `until`, epoch ms on the store's clock.
      await limiter.overrides.set('k', { limit: 100, until: clock.now + 5_000 })
      clock.advance(4_999)
      expect((await limiter.limit('k')).allowed).toBe(true)
      clock.advance(1)
      expect((await limiter.limit('k')).allowed).toBe(false)
    })

    it('a block refuses a call already waiting for its slot: wait() rejects, naming the block', async () => {
      // One slot every 20 ms: the call waits 20 ms of real time for its slot.
      const given = await operating(gcra({ limit: 50, window: '1s', burst: 1 }))
      if (given === undefined || given.store.reservations !== true) return
      const { limiter } = given
      expect((await limiter.limit('k')).allowed).toBe(true)
      const waiting = limiter.wait('k', { maxWait: '1s' })
      const placed = await limiter.overrides.block('k', { for: '1m', reason: 'while waiting' })
      const refused = await waiting.then(
        () => 'ran',
        (error: unknown) => error,
      )
      expect(refused).toMatchObject({
        code: 'ERR_RATEWINDOW_WAIT_EXCEEDED',
        result: { allowed: false, manualBlock: placed },
      })
    })

    it('a block refuses the key whatever its counters say, survives reset, and ends on time (or at unblock)', async () => {
      const given = await operating(fixedWindow({ limit: 100, window: '1m' }))
      if (given === undefined) return
      const { clock, limiter } = given
      const placed = await limiter.overrides.block('k', { for: '1h', reason: 'abuse ticket 7' })
      expect(placed).toEqual({ until: START + 60 * MINUTE, reason: 'abuse ticket 7' })
      const refused = await limiter.limit('k')
      expect(refused).toMatchObject({
        allowed: false,
        blocked: 60 * MINUTE,
        retryAfter: 60 * MINUTE,
        remaining: 0,
      })
      expect(refused.manualBlock).toEqual(placed)
      expect((await limiter.limit('other')).allowed).toBe(true)
      await limiter.reset('k')
      expect((await limiter.limit('k')).allowed).toBe(false)
      clock.advance(60 * MINUTE - 1)
      expect(await limiter.limit('k')).toMatchObject({ allowed: false, blocked: 1 })
      clock.advance(1)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 99 })
      await limiter.overrides.block('k', { for: '1d' })
      await limiter.overrides.unblock('k')
      expect((await limiter.limit('k')).allowed).toBe(true)
    })

    it('inspect tells where a key stands and changes nothing', async () => {
      const given = await operating([
        fixedWindow({ limit: 5, window: '1m', name: 'minute' }),
        tokenBucket({ capacity: 10, refillRate: 1, interval: '1s', name: 'bucket' }),
      ])
      if (given === undefined) return
      const { limiter } = given
      expect(await admitted(limiter, 'k', 2)).toBe(2)
      await limiter.overrides.set('k', { rules: { minute: { limit: 8 } } })
      const first = await limiter.overrides.inspect('k')
      expect(first).toMatchObject({ key: 'k', at: START, override: { rules: { minute: { limit: 8 } } } })
      expect(first.rules).toEqual([
        {
          name: 'minute',
          algorithm: 'fixed-window',
          limit: 8,
          overridden: true,
          used: 2,
          remaining: 6,
          nextFree: 0,
          reset: 40_000,
        },
        {
          name: 'bucket',
          algorithm: 'token-bucket',
          limit: 10,
          overridden: false,
          used: 2,
          remaining: 8,
          nextFree: 0,
          reset: 2_000,
        },
      ])
      expect(await limiter.overrides.inspect('k')).toEqual(first)
      await limiter.overrides.block('k', { for: '1m', reason: 'why' })
      expect((await limiter.overrides.inspect('k')).block).toEqual({ until: START + MINUTE, reason: 'why' })
      await limiter.overrides.unblock('k')
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 5 })
    })

    it('give and take add and remove units without a result in hand, never past empty or full', async () => {
      const given = await operating(fixedWindow({ limit: 5, window: '1m' }))
      if (given === undefined) return
      const { limiter } = given
      expect(await limiter.overrides.take('k', 3)).toBe(3)
      expect(await limiter.overrides.take('k', 4)).toBe(2)
      expect((await limiter.limit('k')).allowed).toBe(false)
      await limiter.overrides.give('k', 2)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 1 })
      await limiter.overrides.give('k', 50)
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, remaining: 4 })
    })

    it('give on a sliding window log gives back its newest units, whatever the times they were admitted at', async () => {
      const given = await operating(slidingWindowLog({ limit: 5, window: '1m' }))
      if (given === undefined) return
      const { clock, limiter } = given
      for (let i = 0; i < 4; i++) {
        expect((await limiter.limit('k')).allowed).toBe(true)
        clock.advance(1_000)
      }
      // Units admitted 4, 3, 2 and 1 s ago: the newest two go back, the oldest two stay until they leave.
      await limiter.overrides.give('k', 2)
      expect(await limiter.overrides.inspect('k')).toMatchObject({ rules: [{ used: 2, reset: 57_000 }] })
      await limiter.overrides.give('k', 5)
      expect((await limiter.overrides.inspect('k')).rules[0]).toMatchObject({ used: 0, remaining: 5 })
    })

    it('records are per limiter name or group, and outlive a deploy that changes the coded limit', async () => {
      const given = await operating(fixedWindow({ limit: 2, window: '1m' }), { name: 'api' })
      if (given === undefined) return
      const { store, limiter } = given
      const same = { store, prefix: limiter.prefix, timeout: '30s', overrides: true } as const
      await limiter.overrides.block('k', { for: '1m' })
      const redeployed = new RateLimiter({
        ...same,
        name: 'api',
        rules: fixedWindow({ limit: 3, window: '1m' }),
      })
      expect((await redeployed.limit('k')).allowed).toBe(false)
      const other = new RateLimiter({
        ...same,
        name: 'login',
        rules: fixedWindow({ limit: 2, window: '1m' }),
      })
      expect((await other.limit('k')).allowed).toBe(true)
      const member = (name: string) =>
        new RateLimiter({ ...same, name, group: 'shared', rules: fixedWindow({ limit: 2, window: '1m' }) })
      await member('a').overrides.set('k', { limit: 50 })
      expect(await member('b').limit('k')).toMatchObject({ limit: 50 })
    })

    it('list pages through every key with an override or a block, with the raw key', async () => {
      const given = await operating(fixedWindow({ limit: 2, window: '1m' }))
      if (given === undefined) return
      const { limiter } = given
      const keys = Array.from({ length: 25 }, (_, i) => `customer:${i}`)
      for (const key of keys.slice(0, 20)) await limiter.overrides.set(key, { limit: 10 })
      for (const key of keys.slice(20)) await limiter.overrides.block(key, { for: '1h', reason: key })
      const seen = new Set<string>()
      let cursor: string | undefined
      let pages = 0
      do {
        const page = await limiter.overrides.list(cursor === undefined ? { count: 7 } : { cursor, count: 7 })
        for (const record of page.records) seen.add(record.key)
        cursor = page.cursor
        pages++
        // A page may be empty before the end (a scan of a shared keyspace): the bound only stops a store that
        // never ends its cursor.
      } while (cursor !== undefined && pages < 100_000)
      expect([...seen].sort()).toEqual([...keys].sort())
    })

    it('1,000 decisions racing an override change admit no more than the higher of the two limits', async () => {
      const given = await operating(fixedWindow({ limit: 100, window: '1h' }))
      if (given === undefined) return
      const { limiter } = given
      const decisions = Array.from({ length: 1_000 }, (_, i) =>
        i === 300
          ? limiter.overrides.set('k', { limit: 400 }).then(() => false)
          : limiter.limit('k').then((r) => r.allowed),
      )
      const admittedCount = (await Promise.all(decisions)).filter(Boolean).length
      expect(admittedCount).toBeLessThanOrEqual(400)
      expect(admittedCount >= 100).toBe(true)
    })

    it("reset forgets an overridden key's counters and keeps its override", async () => {
      const given = await operating(fixedWindow({ limit: 2, window: '1h' }))
      if (given === undefined) return
      const { limiter } = given
      await limiter.overrides.set('k', { limit: 3 })
      expect(await admitted(limiter, 'k', 4)).toBe(3)
      await limiter.reset('k')
      expect(await limiter.limit('k')).toMatchObject({ allowed: true, limit: 3, remaining: 2 })
    })

    describeAcrossProcesses(suite, operating)

    it('a limiter without `overrides: true` refuses set and block with a coded error and reads nothing', async () => {
      const { limiter } = await setup(fixedWindow({ limit: 1, window: '1s' }), START)
      await expectCode(() => limiter.overrides.set('k', { limit: 5 }), 'ERR_RATEWINDOW_OVERRIDES_OFF')
      await expectCode(() => limiter.overrides.block('k', { for: '1m' }), 'ERR_RATEWINDOW_OVERRIDES_OFF')
    })

    async function expectCode(run: () => Promise<unknown>, code: string): Promise<void> {
      let caught: unknown
      try {
        await run()
      } catch (error) {
        caught = error
      }
      expect((caught as { code?: string } | undefined)?.code).toBe(code)
    }
  })
}
