/**
 * What each policy of issue 14 costs per decision, beside a plain rule: core decisions per second and µs per
 * decision on the memory store (one hot key and 10k keys), and on one local redis-server (sequential round
 * trips, then 64 in flight); and Redis memory per key (MEMORY USAGE) for the GCRA state, a penalty and a
 * lease set. CPU-light: small counts, medians of 3 rounds. Figures, never pass/fail.
 * Run: pnpm build && pnpm --filter @ratewindow/bench policies
 */
import {
  ConcurrencyLimiter,
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimiter,
  RedisStore,
  type Store,
  slidingWindowCounter,
  tokenBucket,
} from '@ratewindow/core'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { formatRate, opsPerSecond, table } from './stats.js'

const OPERATIONS = Number(process.env.OPERATIONS ?? 20_000)
const REDIS_OPERATIONS = Number(process.env.REDIS_OPERATIONS ?? 2_000)
const ROUNDS = 3
const PENALTY = { after: 5, within: '1m', block: '5m', factor: 2, maxBlock: '1h' } as const

type Case = [string, (store: Store & ConcurrencyStoreLike) => (key: string) => Promise<unknown>]
type ConcurrencyStoreLike = MemoryStore | RedisStore

const big = 100_000_000
const CASES: Case[] = [
  ['sliding-window-counter (baseline)', (store) => limit(store, {})],
  [
    'token-bucket',
    (store) => {
      const limiter = new RateLimiter({ rules: tokenBucket({ capacity: big, refillRate: 1_000 }), store })
      return (key) => limiter.limit(key)
    },
  ],
  [
    'gcra',
    (store) => {
      const limiter = new RateLimiter({ rules: gcra({ limit: 1_000, window: '1s', burst: big }), store })
      return (key) => limiter.limit(key)
    },
  ],
  ['counter + penalty', (store) => limit(store, { penalty: PENALTY })],
  [
    'counter + settle (reserve 10, settle 7)',
    (store) => {
      const limiter = new RateLimiter({ rules: slidingWindowCounter({ limit: big, window: '1m' }), store })
      return async (key) => limiter.settle(await limiter.limit(key, { cost: 10 }), 7)
    },
  ],
  [
    'counter + settle (reserve 10, settle 13)',
    (store) => {
      const limiter = new RateLimiter({ rules: slidingWindowCounter({ limit: big, window: '1m' }), store })
      return async (key) => limiter.settle(await limiter.limit(key, { cost: 10 }), 13)
    },
  ],
  [
    'concurrency acquire + release',
    (store) => {
      const limiter = new ConcurrencyLimiter({ limit: 1_000, store })
      return async (key) => (await limiter.acquire(key)).release()
    },
  ],
]

function limit(store: Store, more: { penalty?: typeof PENALTY }) {
  const limiter = new RateLimiter({
    rules: slidingWindowCounter({ limit: big, window: '1m' }),
    store,
    ...more,
  })
  return (key: string) => limiter.limit(key)
}

async function rate(
  decide: (key: string) => Promise<unknown>,
  keys: readonly string[],
  operations: number,
  inFlight: number,
): Promise<number> {
  return opsPerSecond(ROUNDS, operations, async () => {
    let next = 0
    const worker = async () => {
      while (next < operations) {
        const i = next++
        await decide(keys[i % keys.length]!)
      }
    }
    await Promise.all(Array.from({ length: inFlight }, worker))
  })
}

const hot = ['hot']
const many = Array.from({ length: 10_000 }, (_, i) => `client-${i}`)
const us = (ops: number) => (1e6 / ops).toFixed(2)

const memoryRows: string[][] = []
for (const [name, make] of CASES) {
  const store = new MemoryStore({ maxKeys: 1_000_000 })
  const one = await rate(make(store), hot, OPERATIONS, 1)
  const spread = await rate(make(store), many, OPERATIONS, 1)
  memoryRows.push([name, formatRate(one), us(one), formatRate(spread), us(spread)])
  store.close()
}
console.log(
  `Memory store, ${OPERATIONS} decisions per round, median of ${ROUNDS} (node ${process.version})\n`,
)
console.log(table(['policy', 'hot key /s', 'µs', '10k keys /s', 'µs'], memoryRows))

const server = await RedisServer.start()
try {
  const client = new Redis({ port: server.port, host: '127.0.0.1' })
  const redisRows: string[][] = []
  for (const [name, make] of CASES) {
    const store = new RedisStore({ client })
    const sequential = await rate(make(store), many, REDIS_OPERATIONS, 1)
    const parallel = await rate(make(store), many, REDIS_OPERATIONS * 4, 64)
    redisRows.push([name, formatRate(sequential), us(sequential), formatRate(parallel)])
  }
  console.log(
    `\nRedisStore on a local redis-server ${(await client.info('server')).match(/redis_version:(\S+)/)?.[1]} (ioredis), 10k keys, median of ${ROUNDS}\n`,
  )
  console.log(table(['policy', 'sequential /s', 'µs per round trip', '64 in flight /s'], redisRows))

  // Memory per key: each state filled as it is in use.
  const store = new RedisStore({ client })
  const bytes = async (key: string) => Number(await client.memory('USAGE', key, 'SAMPLES', '0'))
  const rows: string[][] = []
  const gcraRule = gcra({ limit: 10, window: '1s', burst: 20 })
  const gcraLimiter = new RateLimiter({ rules: gcraRule, store, prefix: 'm1' })
  await gcraLimiter.limit('user')
  rows.push(['gcra state (TAT)', String(await bytes(store.keyFor('m1', 'user', gcraRule)))])
  const tb = tokenBucket({ capacity: 20, refillRate: 10 })
  await new RateLimiter({ rules: tb, store, prefix: 'm1' }).limit('user')
  rows.push(['token-bucket state, for comparison', String(await bytes(store.keyFor('m1', 'user', tb)))])
  const fw = fixedWindow({ limit: 1, window: '1h' })
  const penalized = new RateLimiter({ rules: fw, store, prefix: 'm2', penalty: PENALTY })
  for (let i = 0; i < 3; i++) await penalized.limit('user')
  rows.push(['penalty state (counting denials)', String(await bytes(store.penaltyKeyFor('m2', 'user')))])
  for (let i = 0; i < 5; i++) await penalized.limit('user')
  rows.push(['penalty state (blocked, level 1)', String(await bytes(store.penaltyKeyFor('m2', 'user')))])
  for (const held of [1, 10, 100]) {
    const concurrency = new ConcurrencyLimiter({ limit: 1_000, store, prefix: `m3-${held}` })
    for (let i = 0; i < held; i++) await concurrency.acquire('user')
    rows.push([`lease set, ${held} in flight`, String(await bytes(store.leaseKeyFor(`m3-${held}`, 'user')))])
  }
  console.log('\nRedis MEMORY USAGE per key (bytes, SAMPLES 0)\n')
  console.log(table(['key', 'bytes'], rows))
  await client.quit()
} finally {
  await server.stop()
}
