/**
 * Core decisions per second on the memory store, for each algorithm, one hot key and 100k keys in rotation,
 * beside rate-limiter-flexible's RateLimiterMemory and express-rate-limit's MemoryStore in the same run; and
 * retained heap per key with 1M keys. Medians of 5 rounds.
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import {
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimiter,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { MemoryStore as ExpressMemoryStore } from 'express-rate-limit'
import { RateLimiterMemory } from 'rate-limiter-flexible'
import { formatRate, opsPerSecond, table } from './stats.js'

const OPERATIONS = 200_000
const ROUNDS = 5

type Contender = [string, () => (key: string) => Promise<unknown>]

const ours =
  (rule: () => Rule): (() => (key: string) => Promise<unknown>) =>
  () => {
    const limiter = new RateLimiter({ rules: rule(), store: new MemoryStore({ maxKeys: 2_000_000 }) })
    return (key) => limiter.limit(key)
  }

export const CONTENDERS: Contender[] = [
  ['ratewindow fixed-window', ours(() => fixedWindow({ limit: 100_000_000, window: '1m' }))],
  [
    'ratewindow sliding-window-counter',
    ours(() => slidingWindowCounter({ limit: 100_000_000, window: '1m' })),
  ],
  ['ratewindow sliding-window-log (limit 100)', ours(() => slidingWindowLog({ limit: 100, window: '1m' }))],
  ['ratewindow token-bucket', ours(() => tokenBucket({ capacity: 100_000_000, refillRate: 1_000 }))],
  ['ratewindow gcra', ours(() => gcra({ limit: 1_000, window: '1s', burst: 100_000_000 }))],
  [
    'rate-limiter-flexible RateLimiterMemory',
    () => {
      const limiter = new RateLimiterMemory({ points: 100_000_000, duration: 60 })
      return (key) => limiter.consume(key)
    },
  ],
  [
    'express-rate-limit MemoryStore',
    () => {
      const store = new ExpressMemoryStore()
      store.init({ windowMs: 60_000 } as never)
      return (key) => store.increment(key)
    },
  ],
]

async function rate(make: Contender[1], keyCount: number): Promise<number> {
  const decide = make()
  const keys = Array.from({ length: keyCount }, (_, i) => `client-${i}`)
  return opsPerSecond(ROUNDS, OPERATIONS, async () => {
    for (let i = 0; i < OPERATIONS; i++) await decide(keys[i % keyCount]!)
  })
}

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

async function bytesPerKey(make: Contender[1], keys: number): Promise<number> {
  gc()
  const before = process.memoryUsage().heapUsed
  const decide = make()
  for (let i = 0; i < keys; i++) await decide(`client-${i}`)
  gc()
  const bytes = (process.memoryUsage().heapUsed - before) / keys
  void decide
  return bytes
}

export async function runCore(): Promise<string> {
  const rows: string[][] = []
  for (const [name, make] of CONTENDERS) {
    rows.push([
      name,
      formatRate(await rate(make, 1)),
      formatRate(await rate(make, 100_000)),
      (await bytesPerKey(make, 1_000_000)).toFixed(0),
    ])
  }
  return [
    `Decisions/s on one thread (median of ${ROUNDS} rounds of ${OPERATIONS.toLocaleString('en-US')}), and retained heap per key with 1M keys, Node ${process.version}:`,
    '',
    table(['store', '1 key', '100k keys', 'bytes/key (1M keys)'], rows),
  ].join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await runCore())
