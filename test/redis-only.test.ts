import {
  fixedWindow,
  RateLimiter,
  RedisStore,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import type { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { clusterClient, standaloneClient } from './support/redis.js'
import { RedisServer } from './support/redis-server.js'

const ALGORITHMS: [string, (limit: number) => Rule][] = [
  ['fixed-window', (limit) => fixedWindow({ limit, window: '1h', name: 'fixed' })],
  ['sliding-window-log', (limit) => slidingWindowLog({ limit, window: '1h', name: 'log' })],
  ['sliding-window-counter', (limit) => slidingWindowCounter({ limit, window: '1h', name: 'counter' })],
  [
    'token-bucket',
    (limit) => tokenBucket({ capacity: limit, refillRate: 1, interval: '1h', name: 'bucket' }),
  ],
]
let prefixes = 0
const uniquePrefix = () => `ro${process.pid}x${prefixes++}x`

/** All keys under `pattern`, on every master of a cluster or on one server. */
async function keysMatching(client: Redis | Cluster, pattern: string): Promise<string[]> {
  const nodes = 'nodes' in client ? client.nodes('master') : [client]
  const keys: string[] = []
  for (const node of nodes) keys.push(...(await node.keys(pattern)))
  return keys
}

describe.each([
  ['standalone', () => standaloneClient()],
  ['Cluster', () => clusterClient()],
] as const)('RedisStore on %s', (_, makeClient) => {
  it.each(ALGORITHMS)(
    '%s: 2,000 concurrent requests over 8 connections admit exactly the limit',
    async (_, make) => {
      const rule = make(500)
      const prefix = uniquePrefix()
      const now = 1_700_000_000_000
      const limiters = Array.from(
        { length: 8 },
        () =>
          new RateLimiter({
            rules: rule,
            prefix,
            store: new RedisStore({ client: makeClient(), clock: () => now }),
            // Exactness is the point, not latency: on a loaded machine 2,000 queued decisions can take
            // longer than the default 250 ms, and the failure policy would answer some.
            timeout: '30s',
          }),
      )
      const results = await Promise.all(
        Array.from({ length: 2_000 }, (_, i) => limiters[i % 8]!.limit('hot')),
      )
      expect(results.filter((result) => result.allowed)).toHaveLength(500)
      expect(results.filter((result) => !result.allowed).every((result) => result.retryAfter > 0)).toBe(true)
    },
  )

  it('every key written has a TTL after a run of every algorithm and several rules', async () => {
    const client = makeClient()
    const prefix = uniquePrefix()
    const store = new RedisStore({ client })
    const limiter = new RateLimiter({ rules: ALGORITHMS.map(([, make]) => make(3)), store, prefix })
    for (let i = 0; i < 40; i++) {
      const result = await limiter.limit(`client-${i % 7}`)
      if (i % 5 === 0) await limiter.refund(result)
      await limiter.peek(`client-${i % 9}`)
    }
    const keys = await keysMatching(client, `${prefix}*`)
    expect(keys.length).toBeGreaterThan(0)
    for (const key of keys) expect(await client.pttl(key)).toBeGreaterThan(0)
  })

  it('repairs a key found without a TTL, on the allowed and the denied path', async () => {
    const client = makeClient()
    const store = new RedisStore({ client })
    const rule = fixedWindow({ limit: 2, window: '1h' })
    const prefix = uniquePrefix()
    const limiter = new RateLimiter({ rules: rule, store, prefix })
    const now = Date.now()
    const window = Math.floor(now / 3_600_000)
    for (const [name, count, allowed] of [
      ['below', 1, true],
      ['at-limit', 2, false],
    ] as const) {
      const key = store.keyFor(prefix, name, rule)
      await client.set(key, `${window}:${count}`) // no TTL
      expect(await client.pttl(key)).toBe(-1)
      expect((await limiter.limit(name)).allowed).toBe(allowed)
      const ttl = await client.pttl(key)
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(3_600_000)
    }
  })

  it('hostile identifiers are safe: bounded keys, no stray braces, no shared buckets', async () => {
    const client = makeClient()
    const prefix = uniquePrefix()
    const store = new RedisStore({ client })
    const rules = [
      fixedWindow({ limit: 1, window: '1h' }),
      slidingWindowLog({ limit: 1, window: '1h', name: 'log' }),
    ]
    const limiter = new RateLimiter({ rules, store, prefix })
    const identifiers = ['x'.repeat(10_240), 'a\nb', '{', '}', '', '{tag}', '}{', 'déjà vu 💥', '\u0000', ' ']
    for (const id of identifiers) expect((await limiter.limit(id)).allowed).toBe(true)
    for (const id of identifiers) expect((await limiter.limit(id)).allowed).toBe(false)
    const keys = await keysMatching(client, `${prefix}*`)
    expect(keys).toHaveLength(identifiers.length * rules.length)
    for (const key of keys) {
      expect(key.length).toBeLessThan(80)
      expect(key.match(/[{}]/g)).toEqual(['{', '}'])
    }
  })

  it('SCRIPT FLUSH in the middle of a run causes no error (EVALSHA falls back on NOSCRIPT)', async () => {
    const client = makeClient()
    const limiter = new RateLimiter({
      rules: slidingWindowCounter({ limit: 10, window: '1h' }),
      store: new RedisStore({ client }),
      prefix: uniquePrefix(),
    })
    for (let i = 0; i < 5; i++) expect((await limiter.limit('k')).allowed).toBe(true)
    const nodes = 'nodes' in client ? client.nodes('master') : [client]
    await Promise.all(nodes.map((node) => node.script('FLUSH')))
    for (let i = 0; i < 5; i++) expect((await limiter.limit('k')).allowed).toBe(true)
    expect((await limiter.limit('k')).allowed).toBe(false)
  })
})

describe('Redis server time', () => {
  afterAll(() => {
    vi.useRealTimers()
  })

  it('two limiters whose process clocks differ by 14 minutes make the same decisions', async () => {
    const rule = fixedWindow({ limit: 3, window: '1m' })
    const prefix = uniquePrefix()
    const ahead = new RateLimiter({
      rules: rule,
      prefix,
      store: new RedisStore({ client: standaloneClient() }),
    })
    const behind = new RateLimiter({
      rules: rule,
      prefix,
      store: new RedisStore({ client: standaloneClient() }),
    })
    const [seconds] = await standaloneClient().time()
    const serverNow = Number(seconds) * 1000
    vi.useFakeTimers({ toFake: ['Date'] })
    const decisions: boolean[] = []
    const times: number[] = []
    for (const [limiter, offset] of [
      [ahead, 7],
      [behind, -7],
      [ahead, 7],
      [behind, -7],
    ] as const) {
      vi.setSystemTime(serverNow + offset * 60_000)
      const result = await limiter.limit('shared')
      decisions.push(result.allowed)
      times.push(result.at)
    }
    vi.useRealTimers()
    // One shared minute window: three admitted, the fourth denied, whatever the process clocks say.
    expect(decisions).toEqual([true, true, true, false])
    for (const at of times) expect(Math.abs(at - serverNow)).toBeLessThan(5_000)
  })

  it('with client clocks the same skew splits the window: why server time is the default', async () => {
    const rule = fixedWindow({ limit: 1, window: '1m' })
    const prefix = uniquePrefix()
    const client = standaloneClient()
    const now = 1_700_000_000_000
    const ahead = new RateLimiter({
      rules: rule,
      prefix,
      store: new RedisStore({ client, clock: () => now + 420_000 }),
    })
    const behind = new RateLimiter({
      rules: rule,
      prefix,
      store: new RedisStore({ client, clock: () => now - 420_000 }),
    })
    // The lagging clock first: a window never steps back, so the other order would share the newer window.
    expect((await behind.limit('shared')).allowed).toBe(true)
    expect((await ahead.limit('shared')).allowed).toBe(true) // a different window: the limit is doubled
  })
})

describe('one round trip', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await RedisServer.start()
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('each decision is exactly one command from the client (EVALSHA), whatever the number of rules', async () => {
    const client = standaloneClient(server.port)
    const limiter = new RateLimiter({
      rules: ALGORITHMS.map(([, make]) => make(1_000)),
      store: new RedisStore({ client }),
    })
    await limiter.limit('warm-up') // loads the script once (NOSCRIPT → EVAL)
    await client.config('RESETSTAT')
    for (let i = 0; i < 100; i++) await limiter.limit(`k${i % 10}`)
    const stats = await client.info('commandstats')
    const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
    expect(calls('evalsha')).toBe(100)
    expect(calls('eval')).toBe(0)
    expect(calls('time')).toBe(100) // commandstats counts commands run inside scripts too: one TIME each
  })
})
