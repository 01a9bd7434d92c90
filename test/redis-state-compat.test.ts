/**
 * Issue 45, item 4: the decision scripts changed (a settle's charge goes past the limit up to `maxDebt`, the fixed
 * window carries what it counted beyond the limit, a peek reports the units used), and they must read the state
 * that the previous scripts (commit 41bbd39) left in Redis. That state is written here as those scripts wrote it,
 * shape by shape (their text is not at hand in CI), for a key with 3 of 5 units used a second ago; then the new
 * scripts decide on it, a settle above the estimate included, exactly as on a MemoryStore that counted the same 3.
 *
 * Issue 47 (plans): the fixed window keeps a settle's debt apart from its count (`"<window>:<count>:<debt>"`), so
 * that a count above a limit lowered since (a downgraded plan) ends with its window. The state above reads the same;
 * one that 2b0c094's scripts left past the limit reads as a count without debt (last test).
 */
import {
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimiter,
  type RateLimitResult,
  RedisStore,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import type { Cluster, Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { ManualClock } from './support/clock.js'
import { clusterClient, standaloneClient } from './support/redis.js'

const HOUR = 3_600_000
/** A time inside a window, so that a second later is still in it. */
const T0 = 1_700_000_000_000 + 123_000
const USED = 3

type Client = Redis | Cluster
/** Each algorithm at 5 units an hour, and the state its 41bbd39 script kept after `USED` units at `T0`. */
const SHAPES: [string, () => Rule, (client: Client, key: string) => Promise<unknown>][] = [
  [
    'fixed window: "<window>:<count>", expiring with the window',
    () => fixedWindow({ limit: 5, window: '1h' }),
    (client, key) => {
      const win = Math.floor(T0 / HOUR)
      return client.set(key, `${win}:${USED}`, 'PX', (win + 1) * HOUR - T0)
    },
  ],
  [
    'sliding window log: a sorted set of "<time>:<n>" scored by time',
    () => slidingWindowLog({ limit: 5, window: '1h' }),
    async (client, key) => {
      for (let n = 1; n <= USED; n++) await client.zadd(key, T0, `${T0}:${n}`)
      return client.pexpire(key, HOUR)
    },
  ],
  [
    "sliding window counter: three little-endian doubles (struct.pack('<ddd'))",
    () => slidingWindowCounter({ limit: 5, window: '1h' }),
    (client, key) => {
      const win = Math.floor(T0 / HOUR)
      const packed = Buffer.alloc(24)
      packed.writeDoubleLE(win, 0)
      packed.writeDoubleLE(USED, 8)
      packed.writeDoubleLE(0, 16)
      return client.set(key, packed, 'PX', 2 * HOUR - (T0 - win * HOUR))
    },
  ],
  [
    'token bucket: "<scaled tokens>:<last refill>:<last full>"',
    () => tokenBucket({ capacity: 5, refillRate: 1, interval: '1h' }),
    // Tokens scaled by the interval: 5 − 3 tokens; a bucket full at T0 until the request.
    (client, key) => client.set(key, `${2 * HOUR}:${T0}:${T0}`, 'PX', USED * HOUR),
  ],
  [
    'GCRA: the TAT in ticks (here 1 ms: 1 per hour reduces to scale 1)',
    () => gcra({ limit: 1, window: '1h', burst: 5 }),
    (client, key) => client.set(key, String(T0 + USED * HOUR), 'PX', USED * HOUR),
  ],
]

/** What the new scripts answer along one trace, a second after the old state was written. */
async function trace(limiter: RateLimiter, clock: ManualClock) {
  const seen: unknown[] = []
  const view = (result: RateLimitResult) => {
    const { allowed, remaining, reset, retryAfter } = result
    return { allowed, remaining, reset, retryAfter }
  }
  clock.set(T0 + 1_000)
  seen.push(view(await limiter.peek('k')), (await limiter.overrides.inspect('k')).rules[0])
  const result = await limiter.limit('k')
  seen.push(view(result))
  // 4 of 5 used: 6 more leave the rule 5 past its limit, the default `maxDebt`; 2 are not charged.
  seen.push(await limiter.settle(result, 9))
  seen.push(view(await limiter.peek('k')), (await limiter.overrides.inspect('k')).rules[0])
  clock.advance(HOUR)
  seen.push(view(await limiter.limit('k')))
  return seen
}

describe.each([
  ['standalone', () => standaloneClient()],
  ['Cluster', () => clusterClient()],
] as const)('RedisStore on %s: the scripts read the state 41bbd39 wrote', (_topology, makeClient) => {
  /**
   * A limiter on Redis whose key holds the state `write` leaves, its clock at `at`, and one on a MemoryStore that
   * counted the same `USED` units at T0.
   */
  async function written(
    make: () => Rule,
    write: (client: Client, key: string) => Promise<unknown>,
    at: number,
  ) {
    const rule = make()
    const client = makeClient()
    const clock = new ManualClock(at)
    const prefix = `sc${process.pid}x${Math.random().toString(36).slice(2, 8)}`
    const store = new RedisStore({ client, clock: clock.read })
    const limiter = new RateLimiter({ rules: rule, store, prefix, timeout: '10s' })
    await write(client, store.keyFor(limiter.namespace, 'k', rule))
    const memoryClock = new ManualClock(T0)
    const memory = new RateLimiter({ rules: rule, store: new MemoryStore({ clock: memoryClock.read }) })
    expect((await memory.limit('k', { cost: USED })).allowed).toBe(true)
    return { store, limiter, clock, memory, memoryClock }
  }

  it.each(SHAPES)('%s', async (_shape, make, write) => {
    const { limiter, clock, memory, memoryClock } = await written(make, write, T0)
    const expected = await trace(memory, memoryClock)
    expect(expected[2]).toMatchObject({ allowed: true, remaining: 1 })
    expect(expected[3]).toEqual({ charged: 6, refunded: 0, uncharged: 2 })
    expect(await trace(limiter, clock)).toEqual(expected)
  })

  // Issue 46: the batch script (a group's decisions in one execution) keeps its pending writes otherwise; it reads
  // the same state. Four calls at once: the first goes alone, the three that arrive while it is in flight go as one
  // group, in arrival order, exactly as four calls one after another on a MemoryStore that counted the same 3.
  it.each(SHAPES)('%s, read by a group of decisions', async (_shape, make, write) => {
    const { store, limiter, memory, memoryClock } = await written(make, write, T0 + 1_000)
    memoryClock.set(T0 + 1_000)
    const view = ({ allowed, remaining, reset, retryAfter }: RateLimitResult) => ({
      allowed,
      remaining,
      reset,
      retryAfter,
    })
    const expected: unknown[] = []
    for (let i = 0; i < 4; i++) expected.push(view(await memory.limit('k')))
    expect(expected.map((each) => (each as RateLimitResult).allowed)).toEqual([true, true, false, false])
    const calls = store.groupStats.calls
    const grouped = await Promise.all(Array.from({ length: 4 }, () => limiter.limit('k')))
    expect(grouped.map(view)).toEqual(expected)
    // One call alone, then one for the group (the groups are the client's: count this test's calls only).
    expect(store.groupStats.calls - calls).toBe(2)
  })

  // Issue 47: a count past the limit in the format before the debt was kept apart (`"<window>:<count>"`, which 2b0c094's
  // scripts carried whole into the next windows) reads as that count, without debt: refused to the window's end,
  // then a fresh window (a debt left by a settle just before the deploy is forgiven, one window at most).
  it('a fixed window count past the limit, as 2b0c094 kept it, ends with its window', async () => {
    const client = makeClient()
    const clock = new ManualClock(T0)
    const rule = fixedWindow({ limit: 5, window: '1h' })
    const store = new RedisStore({ client, clock: clock.read })
    const limiter = new RateLimiter({
      rules: rule,
      store,
      prefix: `sd${process.pid}x${Math.random().toString(36).slice(2, 8)}`,
      timeout: '10s',
    })
    const win = Math.floor(T0 / HOUR)
    await client.set(store.keyFor(limiter.namespace, 'k', rule), `${win}:7`, 'PX', (win + 2) * HOUR - T0)
    expect(await limiter.limit('k')).toMatchObject({
      allowed: false,
      remaining: 0,
      retryAfter: (win + 1) * HOUR - T0,
    })
    clock.set((win + 1) * HOUR)
    const next = await limiter.limit('k')
    expect(next).toMatchObject({ allowed: true, remaining: 4 })
  })
})
