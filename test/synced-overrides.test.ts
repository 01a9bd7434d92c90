/**
 * SyncedStore's overrides and manual blocks (issue 34, docs/operating-limits.md): the conformance section for
 * overrides, standalone and on a Cluster, with processes of their own clients on one Redis; then what only
 * SyncedStore has: decisions read the record as the last sync left it (no round trip of their own), a process sees
 * another's change at its next sync of the key, and until then admits at most `maxPending` units under the old
 * record; RedisStore and SyncedStore processes on one Redis read the same records.
 */
import {
  fixedWindow,
  RateLimiter,
  type RedisClient,
  RedisStore,
  SyncedStore,
  slidingWindowCounter,
} from '@ratewindow/core'
import { describeDebtConformance, describeOverridesConformance } from '@ratewindow/testing'
import { afterAll, describe, expect, it } from 'vitest'
import { scriptRunnerFor } from '../packages/core/src/stores/redis/clients/index.js'
import { type ScriptRunner, scriptRunnerOn } from '../packages/core/src/stores/synced/script.js'
import { ManualClock } from './support/clock.js'
import { until } from './support/connections.js'
import { redisEnvironment } from './support/redis.js'
import { clientFamily, connect } from './support/redis-clients.js'

const START = 1_700_000_040_000
let unique = 0
const prefix = () => `so${process.pid}x${unique++}`

const stores: SyncedStore[] = []
afterAll(async () => {
  await Promise.all(stores.splice(0).map((store) => store.close()))
})

function synced(
  client: RedisClient,
  clock: ManualClock,
  more: Partial<ConstructorParameters<typeof SyncedStore>[0]> = {},
) {
  // A long interval: the tests sync by hand (`sync()`), as a tick would.
  const store = new SyncedStore({ client, clock: clock.read, interval: '1h', ...more })
  stores.push(store)
  return store
}

const ioredis = clientFamily('ioredis 5')
const topologies = [
  ['standalone', () => connect(ioredis, redisEnvironment().standalonePort)],
  ['Cluster', () => connect(ioredis, redisEnvironment().clusterNodes)],
] as const

for (const [name, connected] of topologies) {
  let shared: Promise<RedisClient> | undefined
  describeOverridesConformance(
    { describe, it, expect },
    {
      name: `SyncedStore (${name})`,
      createStore: async (clock) => {
        shared ??= connected()
        return synced(await shared, clock)
      },
      // Each process a client of its own.
      createProcess: async (clock) => synced(await connected(), clock),
      seenWithin: { bound: 'at its next sync of the key', reach: (store) => (store as SyncedStore).sync() },
    },
  )
  // Within its bound: the default `maxDebt` (one limit), which its two windows of counters carry exactly.
  describeDebtConformance(
    { describe, it, expect },
    {
      name: `SyncedStore (${name})`,
      createStore: async (clock) => {
        shared ??= connected()
        return synced(await shared, clock)
      },
    },
  )
}

describe.each(topologies)('SyncedStore overrides (%s)', (_name, connected) => {
  /** `count` processes of one limiter (clients of their own) and an operator's, on one clock. */
  async function processes(
    count: number,
    maxPending: number,
    rules = slidingWindowCounter({ limit: 100, window: '1h' }),
  ) {
    const clock = new ManualClock(START)
    const shared = prefix()
    const make = async () =>
      new RateLimiter({
        rules,
        store: synced(await connected(), clock, { maxPending }),
        prefix: shared,
        name: 'api',
        overrides: true,
        timeout: '30s',
      })
    const limiters: RateLimiter[] = []
    for (let i = 0; i < count; i++) limiters.push(await make())
    return { clock, limiters, operator: await make() }
  }
  const admitted = async (limiter: RateLimiter, key: string, times: number) => {
    let count = 0
    for (let i = 0; i < times; i++) if ((await limiter.limit(key)).allowed) count++
    return count
  }

  it('a block set by another process: this one admits at most maxPending units before the sync that reads it, then none', async () => {
    const { limiters, operator } = await processes(2, 4)
    const [first, second] = limiters as [RateLimiter, RateLimiter]
    for (const limiter of limiters) expect(await admitted(limiter, 'k', 2)).toBe(2)
    for (const limiter of limiters) await (limiter.store as SyncedStore).sync()
    await operator.overrides.block('k', { for: '1h', reason: 'abuse' })
    // No sync by hand: the one that maxPending forces reads the record with the counts.
    expect(await admitted(first, 'k', 20)).toBeLessThanOrEqual(4)
    expect(await first.limit('k')).toMatchObject({ allowed: false, manualBlock: { reason: 'abuse' } })
    // A sync by the timer (here by hand) brings it without any admission.
    await second.limit('k')
    await (second.store as SyncedStore).sync()
    expect(await admitted(second, 'k', 10)).toBe(0)
  })

  it('a lowered limit set by another process: at most maxPending units past it before the sync, then the new limit holds', async () => {
    const { limiters, operator } = await processes(1, 3)
    const [first] = limiters as [RateLimiter]
    expect(await admitted(first, 'k', 30)).toBe(30)
    await (first.store as SyncedStore).sync()
    await operator.overrides.set('k', { limit: 20 })
    const past = await admitted(first, 'k', 30)
    expect(past).toBeLessThanOrEqual(3)
    expect(await first.limit('k')).toMatchObject({
      allowed: false,
      limit: 20,
      remaining: 0,
      overridden: true,
    })
    // Raised again by the operator: the next sync brings it, and the units counted stay counted.
    await operator.overrides.set('k', { limit: 40 })
    await (first.store as SyncedStore).sync()
    expect(await first.peek('k', { cost: 0 })).toMatchObject({ limit: 40, remaining: 10 - past })
    expect((await first.overrides.inspect('k')).rules).toMatchObject([
      { algorithm: 'sliding-window-counter', limit: 40, overridden: true, used: 30 + past },
    ])
    expect(await admitted(first, 'k', 40)).toBe(10 - past)
  })

  it("the interval's own sync brings another process's block and unblock to a key in use, no sync by hand", async () => {
    const clock = new ManualClock(START)
    const shared = prefix()
    const make = async () =>
      new RateLimiter({
        rules: fixedWindow({ limit: 10, window: '1h' }),
        store: synced(await connected(), clock, { interval: '20ms' }),
        prefix: shared,
        name: 'api',
        overrides: true,
      })
    const [watcher, operator] = [await make(), await make()]
    expect((await watcher.peek('k')).allowed).toBe(true)
    await operator.overrides.block('k', { for: '1m', reason: 'incident' })
    // Each peek uses the key (so the next tick syncs it) and admits nothing.
    await until(
      async () => (await watcher.peek('k')).manualBlock?.reason === 'incident',
      'a tick of the watching store read the block',
    )
    await operator.overrides.unblock('k')
    await until(
      async () => (await watcher.peek('k')).allowed,
      'a tick of the watching store read the unblock',
    )
  })

  it('decisions read the record as the last sync left it: no round trip of their own, one script per sync', async () => {
    const client = await connected()
    const commands = scriptRunnerFor(client)!
    const sent: { keys: readonly string[]; reply: unknown }[] = []
    const runner = scriptRunnerOn(commands)
    const clock = new ManualClock(START)
    const store = synced(client, clock, {
      maxPending: 1_000,
      runner: {
        async run(script, keys, args) {
          const reply = await runner.run(script, keys, args)
          sent.push({ keys, reply })
          return reply
        },
      } satisfies ScriptRunner,
    })
    const limiter = new RateLimiter({
      rules: [
        slidingWindowCounter({ limit: 10, window: '1m', name: 'minute' }),
        fixedWindow({ limit: 50, window: '1h', name: 'hour' }),
      ],
      store,
      prefix: prefix(),
      overrides: true,
    })
    await limiter.overrides.set('k', { rules: { minute: { limit: 30 } } })
    await limiter.overrides.block('blocked', { for: '1h' })
    for (const key of ['k', 'blocked', 'plain']) await limiter.limit(key) // read once each, before deciding
    expect(sent).toHaveLength(3)
    sent.length = 0
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) => limiter.limit(['k', 'blocked', 'plain'][i % 3]!)),
    )
    expect(sent).toHaveLength(0)
    expect(results.filter((result) => result.allowed && result.limit === 30)).toHaveLength(20)
    expect(results.filter((result) => result.manualBlock !== undefined)).toHaveLength(20)
    await store.sync()
    // One script: each key's two counters, then each record (the same hash tag: one slot on a Cluster).
    expect(sent).toHaveLength(commands.cluster ? 3 : 1)
    const keys = sent.flatMap((each) => each.keys)
    expect(keys.filter((key) => key.endsWith(':o'))).toHaveLength(3)
    expect(keys.filter((key) => key.endsWith(':s'))).toHaveLength(6)
  })

  it("this process's own change is not undone by a sync that read the record before it (regression)", async () => {
    const client = await connected()
    const runner = scriptRunnerOn(scriptRunnerFor(client)!)
    let hold: Promise<void> | undefined
    const store = synced(client, new ManualClock(START), {
      runner: {
        async run(script, keys, args) {
          const reply = await runner.run(script, keys, args)
          await hold
          return reply
        },
      } satisfies ScriptRunner,
    })
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1h' }),
      store,
      prefix: prefix(),
      overrides: true,
    })
    await limiter.limit('k')
    let release = () => {}
    hold = new Promise((resolve) => {
      release = resolve
    })
    const syncing = store.sync() // reads 'no record', its reply held back
    await limiter.overrides.set('k', { limit: 10 })
    release()
    await syncing
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, limit: 10, overridden: true })
  })

  it('RedisStore and SyncedStore processes with one store prefix read and write the same records', async () => {
    const clock = new ManualClock(START)
    const shared = prefix()
    const options = { prefix: shared, name: 'api', overrides: true, timeout: '30s' } as const
    const exact = new RateLimiter({
      ...options,
      rules: fixedWindow({ limit: 5, window: '1h' }),
      store: new RedisStore({ client: await connected(), clock: clock.read }),
    })
    const local = new RateLimiter({
      ...options,
      rules: fixedWindow({ limit: 5, window: '1h' }),
      store: synced(await connected(), clock),
    })
    await exact.overrides.block('k', { for: '1m', reason: 'from RedisStore' })
    expect(await local.limit('k')).toMatchObject({
      allowed: false,
      manualBlock: { reason: 'from RedisStore' },
    })
    await local.overrides.unblock('k')
    await local.overrides.set('k', { limit: 7 }, { ttl: '1m' })
    expect(await exact.limit('k')).toMatchObject({ allowed: true, limit: 7, overridden: true })
    expect(await exact.overrides.get('k')).toEqual({ limit: 7, until: START + 60_000 })
    const listed: string[] = []
    let cursor: string | undefined
    do {
      const page = await local.overrides.list(cursor === undefined ? {} : { cursor })
      listed.push(...page.records.map((record) => record.key))
      cursor = page.cursor
    } while (cursor !== undefined)
    expect(listed).toEqual(['k'])
  })
})
