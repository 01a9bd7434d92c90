/**
 * Core decisions per second for each algorithm on the MemoryStore: one hot key, and 100k keys in rotation.
 * Run: pnpm bench (or pnpm --filter @ratewindow/bench core). Prints medians of 5 rounds.
 */
import {
  fixedWindow,
  MemoryStore,
  RateLimiter,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { formatRate, opsPerSecond, table } from './stats.js'

const OPERATIONS = 200_000
const ROUNDS = 5

const algorithms: [string, () => Rule][] = [
  ['fixed-window', () => fixedWindow({ limit: 1_000_000, window: '1m' })],
  ['sliding-window-log (limit 100)', () => slidingWindowLog({ limit: 100, window: '1m' })],
  ['sliding-window-counter', () => slidingWindowCounter({ limit: 1_000_000, window: '1m' })],
  ['token-bucket', () => tokenBucket({ capacity: 1_000_000, refillRate: 1_000 })],
]

async function measure(rule: Rule, keyCount: number): Promise<number> {
  const limiter = new RateLimiter({ rules: rule, store: new MemoryStore({ maxKeys: keyCount + 1 }) })
  const keys = Array.from({ length: keyCount }, (_, i) => `client-${i}`)
  return opsPerSecond(ROUNDS, OPERATIONS, async () => {
    for (let i = 0; i < OPERATIONS; i++) await limiter.limit(keys[i % keyCount]!)
  })
}

const rows: string[][] = []
for (const [name, make] of algorithms) {
  rows.push([name, formatRate(await measure(make(), 1)), formatRate(await measure(make(), 100_000))])
}
console.log(
  `MemoryStore decisions/s (median of ${ROUNDS} rounds of ${OPERATIONS.toLocaleString('en-US')}, Node ${process.version})\n`,
)
console.log(table(['algorithm', '1 key', '100k keys'], rows))
