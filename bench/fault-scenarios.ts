/**
 * Scripted faults, on real redis-server processes on 127.0.0.1, with the figures the failure policy is judged
 * by: requests admitted, requests answered by the policy, worst latency. Bounded: a few hundred decisions per
 * scenario; every wait is capped at 3 s and reported as "no answer" past that.
 *
 *   1. a Cluster master (3 masters, no replica) killed under load: clients on the healthy masters vs the dead one;
 *   2. one key of the wrong Redis type, and one key that always gets a Redis reply error: the other clients;
 *   3. a SIGSTOP stall with onStoreError 'deny': five refused login attempts, then the same user afterwards;
 *   4. a hung fallback, refund() and reset() on a hung store; an onError that throws or rejects.
 *
 * Compare two versions of the limiter by pointing RATEWINDOW_CORE at another build or source entry:
 *   pnpm --filter @ratewindow/bench faults                                   # the built @ratewindow/core
 *   RATEWINDOW_CORE=<checkout>/packages/core/src/index.ts pnpm --filter @ratewindow/bench faults
 */
import { once } from 'node:events'
import { isAbsolute, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Cluster, Redis } from 'ioredis'
import { RedisClusterProcesses, RedisServer } from '../test/support/redis-server.js'
import { table } from './stats.js'

type Core = typeof import('@ratewindow/core')
type Result = Awaited<ReturnType<InstanceType<Core['RateLimiter']>['limit']>>

const entry = process.env.RATEWINDOW_CORE
const core: Core = await import(
  entry ? pathToFileURL(isAbsolute(entry) ? entry : resolve(process.cwd(), entry)).href : '@ratewindow/core'
)
const { RateLimiter, RedisStore, fixedWindow } = core

const CAP_MS = 3_000
const FAIL_FAST = { maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false, connectTimeout: 500 }
const unhandled: unknown[] = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

/** Settles with the value and its latency, or `undefined` after CAP_MS. */
async function timed<T>(work: () => Promise<T>): Promise<{ value?: T; error?: unknown; ms: number }> {
  const begin = performance.now()
  let timer: NodeJS.Timeout | undefined
  const cap = new Promise<'cap'>((resolve) => {
    timer = setTimeout(() => resolve('cap'), CAP_MS)
  })
  try {
    const value = await Promise.race([work(), cap])
    return value === 'cap'
      ? { ms: Number.POSITIVE_INFINITY }
      : { value: value as T, ms: performance.now() - begin }
  } catch (error) {
    return { error, ms: performance.now() - begin }
  } finally {
    clearTimeout(timer)
  }
}

const ms = (value: number) =>
  Number.isFinite(value) ? `${value.toFixed(0)} ms` : `no answer in ${CAP_MS} ms`

function standaloneClient(port: number): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    ...FAIL_FAST,
    enableOfflineQueue: false,
    retryStrategy: () => 50,
  })
  client.on('error', () => {})
  return client
}

async function pid(server: RedisServer): Promise<number> {
  return Number(/process_id:(\d+)/.exec(await server.cli('info', 'server'))![1])
}

async function clusterScenario(): Promise<string[][]> {
  const LIMIT = 40
  const ROUNDS = 70
  const KILL_AFTER = 15
  const PER_MASTER = 8
  const cluster = await RedisClusterProcesses.start(3, 0)
  const client = new Cluster(cluster.startupNodes, {
    redisOptions: FAIL_FAST,
    enableOfflineQueue: false,
    clusterRetryStrategy: () => 100,
    slotsRefreshTimeout: 500,
    slotsRefreshInterval: 1_000,
  })
  client.on('error', () => {})
  await once(client, 'ready')
  const store = new RedisStore({ client })
  const rule = fixedWindow({ limit: LIMIT, window: '1h' })
  const ranges = (await client.cluster('SLOTS')) as unknown as [number, number, [string, number]][]
  const victim = cluster.nodes[0]!.port
  const setups = []
  for (const policy of ['allow', 'deny'] as const) {
    const limiter = new RateLimiter({
      rules: rule,
      store,
      prefix: `bench-${policy}`,
      onStoreError: policy,
      timeout: '1s',
      onError: () => {},
    })
    const keys: { key: string; dead: boolean }[] = []
    const perMaster = new Map<number, number>()
    for (let i = 0; keys.length < 3 * PER_MASTER; i++) {
      const key = `client-${i}`
      const slot = Number(await client.cluster('KEYSLOT', store.keyFor(limiter.namespace, key, rule)))
      const port = ranges.find(([from, to]) => slot >= from && slot <= to)![2][1]
      if ((perMaster.get(port) ?? 0) >= PER_MASTER) continue
      perMaster.set(port, (perMaster.get(port) ?? 0) + 1)
      keys.push({ key, dead: port === victim })
    }
    setups.push({ policy, limiter, keys, samples: [] as { dead: boolean; result?: Result; ms: number }[] })
  }
  for (let round = 0; round < ROUNDS; round++) {
    if (round === KILL_AFTER) await cluster.nodes[0]!.kill('SIGKILL')
    await Promise.all(
      setups.flatMap(({ limiter, keys, samples }) =>
        keys.map(async ({ key, dead }) => {
          const { value, ms } = await timed(() => limiter.limit(key))
          samples.push({ dead, result: value, ms })
        }),
      ),
    )
  }
  client.disconnect()
  await cluster.stop()
  const rows: string[][] = []
  for (const { policy, samples } of setups) {
    for (const dead of [false, true]) {
      const mine = samples.filter((sample) => sample.dead === dead)
      const admitted = mine.filter((sample) => sample.result?.allowed).length
      const byPolicy = mine.filter((sample) => sample.result?.source === 'policy').length
      const worst = Math.max(...mine.map((sample) => sample.ms))
      rows.push([
        `1. Cluster, master killed, '${policy}': ${dead ? PER_MASTER : 2 * PER_MASTER} clients on the ${dead ? 'dead master' : 'healthy masters'}`,
        `${admitted} admitted${dead ? '' : ` (limit ${LIMIT * 2 * PER_MASTER})`}`,
        `${byPolicy} of ${mine.length}`,
        ms(worst),
      ])
    }
  }
  return rows
}

async function standaloneScenarios(): Promise<string[][]> {
  const server = await RedisServer.start()
  const client = standaloneClient(server.port)
  await once(client, 'ready')
  const store = new RedisStore({ client })
  const rows: string[][] = []

  // 2. One key of the wrong type.
  {
    const rule = fixedWindow({ limit: 5, window: '1h' })
    const limiter = new RateLimiter({ rules: rule, store, prefix: 'wrongtype', onError: () => {} })
    await client.lpush(store.keyFor(limiter.namespace, 'broken', rule), 'not a counter')
    for (let i = 0; i < 10; i++) await limiter.limit('broken')
    const samples = await Promise.all(
      ['alice', 'bob', 'carol'].flatMap((key) =>
        Array.from({ length: 8 }, () => timed(() => limiter.limit(key))),
      ),
    )
    rows.push([
      '2. one key of the wrong type: 3 other clients × 8 requests',
      `${samples.filter((sample) => sample.value?.allowed).length} admitted (limit 15)`,
      `${samples.filter((sample) => sample.value?.source === 'policy').length} of ${samples.length}`,
      ms(Math.max(...samples.map((sample) => sample.ms))),
    ])
  }

  // 2b. One key whose every decision gets a real Redis reply error (WRONGTYPE from a script reading a list),
  // whether or not the rate limit script repairs wrong-type keys: a reply about one key.
  {
    const rule = fixedWindow({ limit: 5, window: '1h' })
    await client.rpush('bench:a-list', 'x')
    const failing = Object.create(store) as typeof store
    failing.consume = (request) =>
      request.key === 'broken'
        ? (client.eval("return redis.call('GET', KEYS[1])", 1, 'bench:a-list') as never)
        : store.consume(request)
    const limiter = new RateLimiter({ rules: rule, store: failing, prefix: 'replyerror', onError: () => {} })
    for (let i = 0; i < 10; i++) await limiter.limit('broken')
    const samples = await Promise.all(
      ['alice', 'bob', 'carol'].flatMap((key) =>
        Array.from({ length: 8 }, () => timed(() => limiter.limit(key))),
      ),
    )
    rows.push([
      '2b. one key answered WRONGTYPE 10 times: 3 other clients × 8 requests',
      `${samples.filter((sample) => sample.value?.allowed).length} admitted (limit 15)`,
      `${samples.filter((sample) => sample.value?.source === 'policy').length} of ${samples.length}`,
      ms(Math.max(...samples.map((sample) => sample.ms))),
    ])
  }

  // 3. A stall with 'deny': five refused login attempts must not be charged.
  {
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '15m' }),
      store,
      prefix: 'login',
      onStoreError: 'deny',
      timeout: '200ms',
      onError: () => {},
    })
    const process_ = await pid(server)
    process.kill(process_, 'SIGSTOP')
    const during = await Promise.all(Array.from({ length: 5 }, () => timed(() => limiter.limit('alice'))))
    process.kill(process_, 'SIGCONT')
    await client.ping()
    await client.ping()
    await new Promise((resolve) => setTimeout(resolve, 2_100)) // the default breaker's cooldown (2 s)
    const after = [] // one after the other: the first is the breaker's probe
    for (let i = 0; i < 6; i++) after.push(await timed(() => limiter.limit('alice')))
    rows.push([
      "3. SIGSTOP stall, 'deny': 5 login attempts during it",
      `${during.filter((sample) => sample.value?.allowed).length} admitted`,
      `${during.filter((sample) => sample.value?.source === 'policy').length} of 5`,
      ms(Math.max(...during.map((sample) => sample.ms))),
    ])
    rows.push([
      '3. … then 6 attempts once Redis answers (limit 5)',
      `${after.filter((sample) => sample.value?.allowed).length} admitted`,
      `${after.filter((sample) => sample.value?.source === 'policy').length} of 6`,
      ms(Math.max(...after.map((sample) => sample.ms))),
    ])
  }

  // 4. Hung fallback, refund() and reset() on a hung store, onError that throws or rejects.
  {
    const stalled = await RedisServer.start()
    const hung = standaloneClient(stalled.port)
    await once(hung, 'ready')
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store: new RedisStore({ client: hung }),
      fallback: new RedisStore({ client: hung, prefix: 'fallback:' }),
      onStoreError: 'deny',
      timeout: '100ms',
      onError: () => {},
    })
    const process_ = await pid(stalled)
    process.kill(process_, 'SIGSTOP')
    const decisions = await Promise.all(Array.from({ length: 5 }, () => timed(() => limiter.limit('k'))))
    const refund = await timed(() =>
      limiter.refund({ key: 'k', cost: 1, at: Date.now(), allowed: true, source: 'store' }),
    )
    const reset = await timed(() => limiter.reset('k'))
    process.kill(process_, 'SIGCONT')
    hung.disconnect()
    await stalled.stop()
    const answered = decisions.filter((sample) => Number.isFinite(sample.ms))
    rows.push([
      '4. hung fallback (timeout 100 ms): 5 requests',
      `${answered.filter((sample) => sample.value?.allowed).length} admitted, ${answered.length} answered`,
      `${answered.filter((sample) => sample.value?.source === 'policy').length} of 5`,
      ms(Math.max(...decisions.map((sample) => sample.ms))),
    ])
    rows.push(['4. refund() on a hung store', 'settled', '–', ms(refund.ms)])
    rows.push([
      '4. reset() on a hung store',
      reset.error ? `rejected (${(reset.error as { code?: string }).code ?? 'error'})` : 'settled',
      '–',
      ms(reset.ms),
    ])
  }
  {
    const down = async (): Promise<never> => {
      throw new Error('connect ECONNREFUSED')
    }
    const store_ = { consume: down, peek: down, refund: down, reset: down }
    for (const [name, onError] of [
      [
        'throws',
        () => {
          throw new Error('broken onError')
        },
      ],
      ['rejects', () => Promise.reject(new Error('broken onError'))],
    ] as const) {
      const before = unhandled.length
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 5, window: '1m' }),
        store: store_,
        onError,
        circuitBreaker: false,
      })
      const samples = await Promise.all(Array.from({ length: 10 }, () => timed(() => limiter.limit('k'))))
      await new Promise((resolve) => setImmediate(resolve))
      rows.push([
        `4. onError ${name}: 10 requests, store down ('allow')`,
        `${samples.filter((sample) => sample.value?.allowed).length} admitted, ${samples.filter((sample) => sample.error).length} limit() rejections, ${unhandled.length - before} unhandled rejections`,
        `${samples.filter((sample) => sample.value?.source === 'policy').length} of 10`,
        ms(Math.max(...samples.map((sample) => sample.ms))),
      ])
    }
  }

  client.disconnect()
  await server.stop()
  return rows
}

export async function runFaults(): Promise<string> {
  const rows = [...(await clusterScenario()), ...(await standaloneScenarios())]
  return table(['scenario', 'admitted', 'answered by the policy', 'worst latency'], rows)
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`core: ${entry ?? '@ratewindow/core (built)'}`)
  console.log(await runFaults())
  process.exit(0)
}
