import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import {
  fixedWindow,
  RateLimitError,
  RateLimiter,
  type RedisClient,
  type Rule,
  SyncedStore,
  slidingWindowCounter,
  slidingWindowLog,
} from '@ratewindow/core'
import fc from 'fast-check'
import { type Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ioredisRunner, scriptRunnerFor } from '../packages/core/src/stores/redis/clients/index.js'
import { clusterSlot } from '../packages/core/src/stores/redis/cluster-slot.js'
import { type ScriptRunner, scriptRunnerOn } from '../packages/core/src/stores/synced/script.js'
import { ManualClock } from './support/clock.js'
import { clusterClient, redisEnvironment, standaloneClient } from './support/redis.js'
import { clientFamily, connect } from './support/redis-clients.js'
import { RedisServer } from './support/redis-server.js'
import { syncTwin } from './support/sync-twin.js'
import { startWorkers, stopWorkers, type WorkerProcess } from './support/synced-processes.js'
import { WORKER_EXEC_ARGV, workerBundle } from './support/worker-bundle.js'

const START = 1_700_000_040_000
let unique = 0
const prefix = () => `sync${process.pid}x${unique++}`

const stores: SyncedStore[] = []
afterAll(async () => {
  await Promise.all(stores.splice(0).map((store) => store.close()))
})

function syncedStore(client: RedisClient, clock: ManualClock, options: { maxPending?: number } = {}) {
  const store = new SyncedStore({ client, clock: clock.read, interval: '1h', ...options })
  stores.push(store)
  return store
}

/** `processes` stores on one Redis, as P application processes would hold them. */
function processes(count: number, client: RedisClient, clock: ManualClock, maxPending: number) {
  return Array.from({ length: count }, () => syncedStore(client, clock, { maxPending }))
}

async function sharedCount(client: Redis | Cluster, store: SyncedStore, limiterPrefix: string, rule: Rule) {
  // `w:c:p`: window index, count in it, count in the window before.
  const value = await client.get(store.keyFor(limiterPrefix, 'k', rule))
  return Number(value?.split(':')[1] ?? 0)
}

describe.each(
  ['ioredis 5', 'node-redis 6'].flatMap((name) => [
    [
      `${name}, standalone`,
      () => connect(clientFamily(name), redisEnvironment().standalonePort),
      () => standaloneClient(),
    ] as const,
    [
      `${name}, Cluster`,
      () => connect(clientFamily(name), redisEnvironment().clusterNodes),
      () => clusterClient(),
    ] as const,
  ]),
)('SyncedStore (%s), one process', (_name, connectClient, inspector) => {
  const rule = slidingWindowCounter({ limit: 10, window: '1m' })

  it('decides locally, admits exactly the limit alone, and its counts reach Redis on sync', async () => {
    const client = inspector()
    const clock = new ManualClock(START)
    const store = syncedStore(await connectClient(), clock, { maxPending: 100 })
    const limiter = new RateLimiter({ rules: rule, store, prefix: prefix() })
    const results = []
    for (let i = 0; i < 12; i++) results.push(await limiter.limit('k'))
    expect(results.map((result) => result.allowed)).toEqual([...Array(10).fill(true), false, false])
    expect(results.map((result) => result.remaining).slice(0, 3)).toEqual([9, 8, 7])
    expect(await sharedCount(client, store, limiter.namespace, rule)).toBe(0) // nothing sent yet
    await store.sync()
    expect(await sharedCount(client, store, limiter.namespace, rule)).toBe(10)
    expect(await client.pttl(store.keyFor(limiter.namespace, 'k', rule))).toBeGreaterThan(60_000)
    // A later write in the same window keeps that TTL (to the end of the next window).
    await limiter.refund(results[0]!)
    await store.sync()
    expect(await sharedCount(client, store, limiter.namespace, rule)).toBe(9)
    expect(await client.pttl(store.keyFor(limiter.namespace, 'k', rule))).toBeGreaterThan(60_000)
  })

  it('decides on the limiter’s local path (decideInto) as through consume, request by request', async () => {
    const clock = new ManualClock(START)
    const client = await connectClient()
    const rules = [fixedWindow({ limit: 5, window: '10s' }), slidingWindowCounter({ limit: 8, window: '1m' })]
    const local = new RateLimiter({
      rules,
      store: syncedStore(client, clock, { maxPending: 3 }),
      prefix: prefix(),
    })
    const store = syncedStore(client, clock, { maxPending: 3 })
    // Seen through a Proxy that forwards `consume`: not the `consume` decideInto mirrors, so the limiter calls it.
    const viaConsume = new Proxy(store, {
      get: (target, name) => {
        const value: unknown = Reflect.get(target, name, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const general = new RateLimiter({ rules, store: viaConsume, prefix: prefix() })
    const view = (result: object) =>
      JSON.stringify(result, (key, value) => (key === 'rule' ? undefined : value))
    for (let i = 0; i < 14; i++) {
      expect(view(await local.limit('k')), `request ${i}`).toBe(view(await general.limit('k')))
      clock.advance(i % 4 === 3 ? 9_000 : 700)
    }
  })

  it('sends its counts as soon as maxPending are unacknowledged; the next request waits for that round trip', async () => {
    const client = inspector()
    const store = syncedStore(await connectClient(), new ManualClock(START), { maxPending: 3 })
    const limiter = new RateLimiter({ rules: rule, store, prefix: prefix() })
    for (let i = 0; i < 3; i++) await limiter.limit('k')
    await limiter.limit('k') // past maxPending: decided after the sync of the first three
    expect(await sharedCount(client, store, limiter.namespace, rule)).toBeGreaterThanOrEqual(3)
  })

  it.each([1, 5])(
    'holds the bound for one process (the limit) whatever the key churn: 20 evictions, maxPending %i',
    async (maxPending) => {
      const store = new SyncedStore({
        client: await connectClient(),
        clock: new ManualClock(START).read,
        interval: '1h',
        maxKeys: 2,
        maxPending,
      })
      stores.push(store)
      const limiter = new RateLimiter({ rules: rule, store, prefix: prefix() })
      let admitted = 0
      for (let round = 0; round < 20; round++) {
        for (let i = 0; i < 10; i++) if ((await limiter.limit('k')).allowed) admitted++
        // Two other keys push 'k' out (maxKeys 2): it comes back cold, or still departing, next round.
        await limiter.limit(`x${round}`)
        await limiter.limit(`y${round}`)
      }
      expect(admitted).toBe(10)
    },
  )

  it('reads the shared count before admitting on a key it has never synced', async () => {
    const client = await connectClient()
    const clock = new ManualClock(START)
    const [a, b] = processes(2, client, clock, 5)
    const p = prefix()
    const limitA = new RateLimiter({ rules: rule, store: a!, prefix: p })
    const limitB = new RateLimiter({ rules: rule, store: b!, prefix: p })
    for (let i = 0; i < 10; i++) expect((await limitA.limit('k')).allowed).toBe(true)
    await a!.sync()
    // B has never seen 'k': it reads the 10 before deciding, and admits nothing.
    expect((await limitB.limit('k')).allowed).toBe(false)
  })

  it('peek in a fresh process reads the shared count first (regression: it reported 10 of 10 free while Redis held 10 used)', async () => {
    const client = await connectClient()
    const clock = new ManualClock(START)
    const [a, b] = processes(2, client, clock, 5)
    const p = prefix()
    const limitA = new RateLimiter({ rules: rule, store: a!, prefix: p })
    for (let i = 0; i < 10; i++) expect((await limitA.limit('k')).allowed).toBe(true)
    await a!.sync()
    // B has never read 'k': its peek asks Redis before answering, and what it read stays for its decisions.
    const limitB = new RateLimiter({ rules: rule, store: b!, prefix: p })
    expect(await limitB.peek('k', { cost: 0 })).toMatchObject({ remaining: 0, source: 'store' })
    expect((await limitB.peek('k')).allowed).toBe(false)
    expect((await limitB.limit('k')).allowed).toBe(false)
  })

  it("propagates: after each process's next sync, every process sees every other's counts", async () => {
    const clock = new ManualClock(START)
    const [a, b] = processes(2, await connectClient(), clock, 100)
    const p = prefix()
    const limitA = new RateLimiter({ rules: rule, store: a!, prefix: p })
    const limitB = new RateLimiter({ rules: rule, store: b!, prefix: p })
    await limitB.limit('k')
    for (let i = 0; i < 5; i++) await limitA.limit('k')
    await a!.sync() // A sends its 5
    expect((await limitB.peek('k', { cost: 0 })).remaining).toBe(9) // B has not heard of A yet
    await b!.sync() // B sends its 1 and reads 6
    expect((await limitB.peek('k', { cost: 0 })).remaining).toBe(4)
    await limitA.limit('k', { cost: 0 }) // A uses the key again, so its next sync reads it back
    await a!.sync()
    expect((await limitA.peek('k', { cost: 0 })).remaining).toBe(4)
  })

  it('sends every key used since the last sync in a few scripts: up to 256 keys each, one slot each on a Cluster', async () => {
    const client = inspector()
    const commands = scriptRunnerFor(await connectClient())!
    const calls: (readonly string[])[] = []
    const runner = scriptRunnerOn(commands)
    const store = new SyncedStore({
      client: commands,
      clock: new ManualClock(START).read,
      interval: '1h',
      maxPending: 100,
      runner: {
        run(script, keys, args) {
          calls.push(keys)
          return runner.run(script, keys, args)
        },
      },
    })
    stores.push(store)
    const rules = [rule, fixedWindow({ limit: 100, window: '1h' })]
    const limiter = new RateLimiter({ rules, store, prefix: prefix() })
    const clients = Array.from({ length: 300 }, (_, i) => `client ${i}`)
    for (const [i, key] of clients.entries()) await limiter.limit(key, { cost: 1 + (i % 3) })
    // Each key, new to this process, was read once before its first admission (one key per script).
    expect(calls.length).toBe(clients.length)
    expect(calls.every((keys) => keys.length === rules.length)).toBe(true)
    calls.length = 0
    await store.sync()
    const slots = new Set(calls.flat().map(clusterSlot))
    expect(calls.length).toBe(commands.cluster ? slots.size : Math.ceil((2 * clients.length) / 256))
    for (const keys of calls) {
      expect(keys.length).toBeLessThanOrEqual(256)
      if (commands.cluster) expect(new Set(keys.map(clusterSlot)).size).toBe(1)
    }
    const counts = await Promise.all(
      clients.flatMap((key) => rules.map((each) => client.get(store.keyFor(limiter.namespace, key, each)))),
    )
    expect(counts.map((value) => Number(value?.split(':')[1]))).toEqual(
      clients.flatMap((_, i) => [1 + (i % 3), 1 + (i % 3)]),
    )
  })

  it('keeps the rules of one client in one Cluster slot (hash tag)', async () => {
    const store = syncedStore(await connectClient(), new ManualClock(START))
    const rules = [rule, fixedWindow({ limit: 100, window: '1h' })]
    const keys = rules.map((each) => store.keyFor('rw', 'client {1}', each))
    expect(keys.every((key) => /^rw\{[\w-]{22}\}:/.test(key))).toBe(true)
    const cluster = clusterClient()
    const slots = await Promise.all(keys.map((key) => cluster.call('CLUSTER', 'KEYSLOT', key)))
    expect(new Set(slots).size).toBe(1)
  })
})

describe('SyncedStore, several processes in one test process (driven clock)', () => {
  it('never admits more than limit + (P − 1) × maxPending, whatever the interleaving of requests and syncs', async () => {
    const client = standaloneClient()
    const limit = 40
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 5 }),
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.tuple(fc.nat(), fc.boolean(), fc.integer({ min: 1, max: 3 })), {
          minLength: 60,
          maxLength: 160,
        }),
        async (count, maxPending, steps) => {
          const clock = new ManualClock(START)
          const stores = processes(count, client, clock, maxPending)
          const p = prefix()
          const limiters = stores.map(
            (store) =>
              new RateLimiter({
                rules: fixedWindow({ limit, window: '1h' }),
                store,
                prefix: p,
                timeout: '10s',
              }),
          )
          let admitted = 0
          let denied = 0
          for (const [who, sync, cost] of steps) {
            const index = who % count
            if (sync) await stores[index]!.sync()
            const result = await limiters[index]!.limit('k', { cost })
            if (result.allowed) admitted += cost
            else denied++
          }
          await Promise.all(stores.map((store) => store.close()))
          // A request costing more than maxPending passes alone, when nothing is unacknowledged.
          expect(admitted).toBeLessThanOrEqual(limit + (count - 1) * Math.max(maxPending, 3))
          if (denied > 0) expect(admitted).toBeGreaterThan(limit - 3)
        },
      ),
      { numRuns: 25 },
    )
  })

  it('gives the same decisions on Redis as on the in-process twin the accuracy lab simulates with', async () => {
    const client = standaloneClient()
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 9_000 }), fc.nat(1), fc.boolean()), {
          minLength: 20,
          maxLength: 80,
        }),
        async (steps) => {
          const clock = new ManualClock(START)
          const rules = [
            slidingWindowCounter({ limit: 12, window: '30s' }),
            fixedWindow({ limit: 20, window: '1m' }),
          ]
          const p = prefix()
          // A store past maxPending syncs in the background; Redis answers later than the twin, so every step
          // first waits for both sides' round trips in flight: the decisions then cannot depend on timing.
          const inFlight = new Set<Promise<unknown>>()
          const tracked = (runner: ScriptRunner): ScriptRunner => ({
            run(script, keys, args) {
              const reply = runner.run(script, keys, args)
              inFlight.add(reply)
              reply.then(
                () => inFlight.delete(reply),
                () => inFlight.delete(reply),
              )
              return reply
            },
          })
          const runners = [tracked(scriptRunnerOn(ioredisRunner(client))), tracked(syncTwin())]
          const sides = runners.map((runner) =>
            Array.from({ length: 2 }, () => {
              const store = new SyncedStore({
                client,
                clock: clock.read,
                interval: '1h',
                maxPending: 2,
                runner,
              })
              stores.push(store)
              return { store, limiter: new RateLimiter({ rules, store, prefix: p, timeout: '10s' }) }
            }),
          )
          for (const [advance, who, sync] of steps) {
            while (inFlight.size > 0) await Promise.allSettled([...inFlight])
            clock.advance(advance)
            const results = []
            for (const side of sides) {
              if (sync) await side[who]!.store.sync()
              const { allowed, remaining, reset, retryAfter } = await side[who]!.limiter.limit('k')
              results.push({ allowed, remaining, reset, retryAfter })
            }
            expect(results[1]).toEqual(results[0])
          }
        },
      ),
      { numRuns: 15 },
    )
  })

  it('decides rule sets it cannot synchronise (a sliding window log) exactly, through a RedisStore', async () => {
    const store = syncedStore(standaloneClient(), new ManualClock(START))
    const limiter = new RateLimiter({
      rules: slidingWindowLog({ limit: 3, window: '1m' }),
      store,
      prefix: prefix(),
    })
    const allowed = []
    for (let i = 0; i < 4; i++) allowed.push((await limiter.limit('k')).allowed)
    expect(allowed).toEqual([true, true, true, false])
  })

  it('bounds the keys it holds; an evicted key still sends its counts', async () => {
    const client = standaloneClient()
    const store = new SyncedStore({ client, maxKeys: 2, maxPending: 100, clock: () => START })
    stores.push(store)
    const rule = slidingWindowCounter({ limit: 10, window: '1m' })
    const limiter = new RateLimiter({ rules: rule, store, prefix: prefix() })
    for (const key of ['k', 'b', 'c']) await limiter.limit(key)
    expect(store.size).toBe(2)
    await new Promise((resolve) => setImmediate(resolve))
    await store.sync()
    expect(await sharedCount(client, store, limiter.namespace, rule)).toBe(1)
  })

  it('close() sends what is pending', async () => {
    const client = standaloneClient()
    const store = new SyncedStore({ client, maxPending: 100, clock: () => START })
    const rule = slidingWindowCounter({ limit: 10, window: '1m' })
    const limiter = new RateLimiter({ rules: rule, store, prefix: prefix() })
    for (let i = 0; i < 3; i++) await limiter.limit('k')
    await store.close()
    expect(await sharedCount(client, store, limiter.namespace, rule)).toBe(3)
  })

  it('sends what it has not sent when the process ends by itself without close() (beforeExit)', async () => {
    const client = standaloneClient()
    const child = spawn(
      process.execPath,
      [
        ...WORKER_EXEC_ARGV,
        await workerBundle(join(import.meta.dirname, 'support', 'synced-exit-worker.ts')),
        String(redisEnvironment().standalonePort),
        prefix(),
        '5',
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
    })
    const [code] = await once(child, 'exit')
    expect(code).toBe(0)
    const key = output.trim()
    expect(key).toMatch(/\{/)
    // 5 admitted, none sent before the end (maxPending 100, interval 1h): the beforeExit send carried them.
    expect(Number((await client.get(key))?.split(':')[1] ?? 0)).toBe(5)
  })

  it('rejects bad options at construction, naming them', () => {
    const client = standaloneClient()
    const cases: [Record<string, unknown>, string][] = [
      [{ client: {} }, 'client'],
      [{ client, interval: '1x' }, 'interval'],
      [{ client, maxPending: 0 }, 'maxPending'],
      [{ client, maxStale: -1 }, 'maxStale'],
      [{ client, maxKeys: 1.5 }, 'maxKeys'],
      [{ client, prefix: '{x}' }, 'prefix'],
      [{ client, clock: 1 }, 'clock'],
    ]
    for (const [options, option] of cases) {
      const thrown = (() => {
        try {
          new SyncedStore(options as never)
        } catch (error) {
          return error
        }
      })()
      expect(thrown).toBeInstanceOf(RateLimitError)
      expect(thrown).toMatchObject({ option })
    }
  })
})

describe('SyncedStore when Redis dies', () => {
  let server: RedisServer
  let client: Redis
  beforeAll(async () => {
    server = await RedisServer.start()
    client = new Redis({ port: server.port, host: '127.0.0.1', enableOfflineQueue: false })
    client.on('error', () => {}) // the refused connections while the server is down are expected
    await once(client, 'ready')
  })
  afterAll(async () => {
    client.disconnect()
    await server.stop()
  })

  it('decides from the last known counts (maxPending more at most) for maxStale, then the failure policy answers; no count is lost', async () => {
    const clock = new ManualClock(START)
    const errors: unknown[] = []
    const store = new SyncedStore({
      client,
      clock: clock.read,
      maxPending: 3,
      maxStale: '2s',
      interval: '1h',
      onError: (error) => errors.push(error),
    })
    const rule = slidingWindowCounter({ limit: 10, window: '1m' })
    const limiter = new RateLimiter({
      rules: rule,
      store,
      prefix: prefix(),
      onStoreError: 'deny',
      circuitBreaker: false,
      onError: (error) => errors.push(error),
    })
    for (let i = 0; i < 2; i++) expect((await limiter.limit('k')).source).toBe('store')
    await store.sync()
    await server.kill('SIGKILL')

    const during = []
    for (let i = 0; i < 5; i++) during.push(await limiter.limit('k'))
    // 3 more from the last known state (maxPending), then the sync they wait for fails: the policy ('deny').
    expect(during.map((result) => [result.source, result.allowed])).toEqual([
      ['store', true],
      ['store', true],
      ['store', true],
      ['policy', false],
      ['policy', false],
    ])
    expect(errors.length).toBeGreaterThan(0)
    // A key this process holds no view of: its first request waits for a sync, which fails: the policy.
    expect(await limiter.limit('new')).toMatchObject({ source: 'policy', allowed: false })
    expect((await limiter.peek('k')).source).toBe('store') // still within maxStale
    clock.advance(2_001)
    expect((await limiter.peek('k')).source).toBe('policy') // past maxStale: the policy for every call

    await server.restart()
    // The client may have reconnected while restart() waited for the server: 'ready' is then already past.
    if (client.status !== 'ready') await once(client, 'ready')
    await store.sync()
    // The restarted server kept nothing (no persistence in these tests): what reached it is the 3 admitted
    // while it was away, sent again. None lost.
    expect(await sharedCount(client, store, limiter.namespace, rule)).toBe(3)
    const after = await limiter.limit('k')
    expect(after).toMatchObject({ source: 'store', allowed: true, remaining: 6 })
    await store.close()
  })
})

describe.each([
  ['standalone', false],
  ['Cluster', true],
])('SyncedStore, 4 real processes sharing one Redis (%s)', (_name, cluster) => {
  const limit = 200
  const maxPending = 10
  const bound = limit + 3 * maxPending
  let workers: WorkerProcess[] = []
  beforeAll(async () => {
    const { standalonePort, clusterNodes } = redisEnvironment()
    workers = await startWorkers(4, {
      ...(cluster ? { clusterNodes } : { port: standalonePort }),
      prefix: prefix(),
      limit,
      window: '1h',
      interval: '20ms',
      maxPending,
    })
  })
  afterAll(async () => {
    await stopWorkers(workers)
    for (const worker of workers) expect(worker.errors).toEqual([])
  })

  async function runAll(trace: 'steady' | 'bursty' | 'at-once', requests: number, key: string) {
    const replies = await Promise.all(
      workers.map((worker) => worker.ask({ type: 'run', trace, requests, key })),
    )
    return replies.map((reply) => reply.admitted!)
  }

  /** What every process reports after one interval each: its sync sends its counts, the next reads them all. */
  async function remainingEverywhere(key: string) {
    await Promise.all(workers.map((worker) => worker.ask({ type: 'sync' })))
    await Promise.all(workers.map((worker) => worker.ask({ type: 'peek', key })))
    await Promise.all(workers.map((worker) => worker.ask({ type: 'sync' })))
    const replies = await Promise.all(workers.map((worker) => worker.ask({ type: 'peek', key })))
    return replies.map((reply) => reply.remaining)
  }

  it.each(['steady', 'bursty', 'at-once'] as const)(
    '%s trace: admitted within limit + (P − 1) × maxPending, and every process ends up seeing the total',
    async (trace) => {
      const admitted = await runAll(trace, 150, trace)
      const total = admitted.reduce((sum, each) => sum + each, 0)
      expect(total).toBeGreaterThanOrEqual(limit)
      expect(total).toBeLessThanOrEqual(bound)
      // A process that starts after the others filled the window reads that before admitting, and may admit
      // nothing; 150 requests each, so at least two processes share the limit.
      expect(admitted.filter((each) => each > 0).length).toBeGreaterThanOrEqual(2)
      expect(await remainingEverywhere(trace)).toEqual([0, 0, 0, 0])
    },
  )

  it('counts below the limit propagate: every process reports the same remaining after one interval each', async () => {
    expect(await runAll('at-once', 20, 'below')).toEqual([20, 20, 20, 20])
    // peek reports the units free now (issue 20)
    expect(await remainingEverywhere('below')).toEqual(Array(4).fill(limit - 80))
  })
})
