/**
 * Issue 35: `limiter.overrides.top` and `topStored` on MemoryStore (RedisStore, standalone and Cluster, with every
 * client: test/support/redis-overrides-suite.ts): the keys nearest their limit found by a bounded scan of the store.
 */
import { describe, expect, it } from 'vitest'
import { topStored } from '../src/entries/stored.js'
import { fixedWindow, gcra, MemoryStore, RateLimiter } from '../src/index.js'
import { plainStore } from './support/counting-store.js'
import { rejection } from './support/rejection.js'

const START = 1_700_000_000_000

/** A limiter of 100 an hour over 1,000 keys used once, ten of them used 21 to 30 times, one blocked. */
async function thousandKeys() {
  const store = new MemoryStore({ clock: () => START })
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 100, window: '1h' }),
    store,
    overrides: true,
  })
  const keys = Array.from({ length: 1000 }, (_, i) => `client-${i}`)
  for (const key of keys) await limiter.limit(key)
  const most = keys.filter((_, i) => i % 97 === 5).slice(0, 10)
  for (const [i, key] of most.entries()) await limiter.overrides.take(key, 20 + i)
  await limiter.overrides.block('client-500', { for: '1h' })
  return { store, limiter, keys, most }
}

describe('overrides.top on MemoryStore', () => {
  it('finds the 10 most limited of 1,000 keys (a blocked key first), raw as the store holds them', async () => {
    const { limiter, most } = await thousandKeys()
    const top = await limiter.overrides.top({ count: 11 })
    expect(top.keys.map((row) => row.key)).toEqual(['client-500', ...[...most].reverse()])
    expect(top.keys[1]).toMatchObject({
      limiter: limiter.name,
      namespace: limiter.namespace,
      hashed: false,
      rule: '100-per-1h',
      used: 30,
      limit: 100,
      remaining: 70,
      blocked: false,
    })
    expect(top.keys[0]).toMatchObject({ key: 'client-500', blocked: true, remaining: 0 })
    // 1,000 clients' counters and one override record.
    expect(top).toMatchObject({ scanned: 1001, complete: true })
  })

  it('`scan` bounds the keys read; `count` the rows; a default of 10', async () => {
    const { limiter } = await thousandKeys()
    expect(await limiter.overrides.top({ scan: 250 })).toMatchObject({ scanned: 250, complete: false })
    expect((await limiter.overrides.top()).keys).toHaveLength(10)
    expect((await limiter.overrides.top({ count: 3 })).keys).toHaveLength(3)
  })

  it("ranks only the limiter's own keys (another limiter on the store is left out)", async () => {
    const { store, limiter } = await thousandKeys()
    const other = new RateLimiter({
      rules: gcra({ limit: 2, window: '1m' }),
      store,
      prefix: 'other',
    })
    await other.limit('elsewhere')
    await other.limit('elsewhere')
    const top = await limiter.overrides.top({ count: 1000, scan: 5000 })
    expect(top.keys.map((row) => row.key)).not.toContain('elsewhere')
    expect(top.keys).toHaveLength(1000)
  })

  it('a key longer than 128 characters shows as the store holds it (hashed)', async () => {
    const store = new MemoryStore({ clock: () => START })
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 5, window: '1m' }), store })
    const long = 'k'.repeat(200)
    await limiter.limit(long)
    await limiter.limit(long)
    const [row] = (await limiter.overrides.top()).keys
    expect(row).toMatchObject({ hashed: true, used: 2 })
    expect(row!.key.startsWith('#')).toBe(true)
  })

  it('topStored reads every limiter the caller names, under its own rules', async () => {
    const { store, limiter } = await thousandKeys()
    const top = await topStored(store, {
      count: 2,
      limiterOf: (namespace) =>
        namespace === limiter.namespace ? { name: 'api', rules: limiter.rules } : undefined,
    })
    // Without the override scope, the block is not read: the two most used come first.
    expect(top.keys.map((row) => [row.limiter, row.key, row.used])).toEqual([
      ['api', 'client-878', 30],
      ['api', 'client-781', 29],
    ])
  })

  it('bad options fail with the option named; a store that cannot scan is named', async () => {
    const { limiter } = await thousandKeys()
    expect((await rejection(() => limiter.overrides.top({ count: 0 }))).message).toMatch(/`count`/)
    expect((await rejection(() => limiter.overrides.top({ scan: 1.5 }))).message).toMatch(/`scan`/)
    expect((await rejection(() => limiter.overrides.top({ scna: 5 } as never))).code).toBe(
      'ERR_RATEWINDOW_UNKNOWN_OPTION',
    )
    const inner = new MemoryStore()
    const plain = plainStore(inner)
    const limited = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1s' }), store: plain })
    expect(limited.overrides.ranks).toBe(false)
    expect(limiter.overrides.ranks).toBe(true)
    const error = await rejection(() => limited.overrides.top())
    expect(error.code).toBe('ERR_RATEWINDOW_STORE')
    expect(error.message).toMatch(/`overrides.top` needs a store with `scanStored`/)
    inner.close()
  })
})
