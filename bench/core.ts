/**
 * Core decisions per second on the memory store, for each algorithm, one hot key and 100k keys in rotation,
 * beside rate-limiter-flexible's RateLimiterMemory and express-rate-limit's MemoryStore in the same run; and
 * retained heap per key with 1M keys. Medians of 5 rounds.
 *
 * With BENCH_BEFORE (the root of an earlier checkout, built: http.ts `buildOf`), also the sliding window counter
 * loop of this build and of that one, interleaved round by round (issue 46: medians of 7 rounds of 200,000).
 */
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
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
import { formatRate, median, opsPerSecond, table } from './stats.js'

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

/** The builds a before/after loop compares: this one, and the one in BENCH_BEFORE. */
type CoreModule = typeof import('@ratewindow/core')

const INTERLEAVED_ROUNDS = 7

/** One round of `OPERATIONS` decisions of a sliding window counter limiter over `keys`, in decisions/s. */
async function loopRound(
  decide: (key: string) => Promise<unknown>,
  keys: readonly string[],
): Promise<number> {
  const start = process.hrtime.bigint()
  for (let i = 0; i < OPERATIONS; i++) await decide(keys[i % keys.length]!)
  return OPERATIONS / (Number(process.hrtime.bigint() - start) / 1e9)
}

/**
 * The sliding window counter loop of this build against the build in BENCH_BEFORE, 1 and 10k keys: the two run
 * one round each in turn (one warm-up round each first), so that the machine's drift falls on both; the figure
 * is the median of the rounds' ratios.
 */
export async function runBeforeAfter(
  root: string,
): Promise<{ rows: { keys: number; ratio: number }[]; text: string }> {
  const before: CoreModule = await import(pathToFileURL(resolve(root, 'packages/core/dist/index.js')).href)
  const after: CoreModule = await import('@ratewindow/core')
  const make = (core: CoreModule) => {
    const limiter = new core.RateLimiter({
      rules: core.slidingWindowCounter({ limit: 100_000_000, window: '1m' }),
      store: new core.MemoryStore({ maxKeys: 2_000_000 }),
    })
    return (key: string) => limiter.limit(key)
  }
  const rows: string[][] = []
  const ratios: { keys: number; ratio: number }[] = []
  for (const count of [1, 10_000]) {
    const keys = Array.from({ length: count }, (_, i) => `client-${i}`)
    const ours = make(after)
    const theirs = make(before)
    await loopRound(ours, keys)
    await loopRound(theirs, keys)
    const rates = { ours: [] as number[], theirs: [] as number[], ratios: [] as number[] }
    for (let round = 0; round < INTERLEAVED_ROUNDS; round++) {
      // Which build goes first alternates: neither always follows the other's garbage.
      let mine = 0
      let theirRate = 0
      if (round % 2 === 0) {
        mine = await loopRound(ours, keys)
        theirRate = await loopRound(theirs, keys)
      } else {
        theirRate = await loopRound(theirs, keys)
        mine = await loopRound(ours, keys)
      }
      rates.ours.push(mine)
      rates.theirs.push(theirRate)
      rates.ratios.push(mine / theirRate)
    }
    ratios.push({ keys: count, ratio: median(rates.ratios) })
    rows.push([
      count.toLocaleString('en-US'),
      formatRate(median(rates.ours)),
      formatRate(median(rates.theirs)),
      median(rates.ratios).toFixed(2),
      `${Math.min(...rates.ratios).toFixed(2)}–${Math.max(...rates.ratios).toFixed(2)}`,
    ])
  }
  const text = [
    `\`MemoryStore\`, sliding window counter, this build against the build before (BENCH_BEFORE), interleaved, ` +
      `median of ${INTERLEAVED_ROUNDS} rounds of ${OPERATIONS.toLocaleString('en-US')}:`,
    '',
    table(['keys', 'decisions/s', 'before', 'ratio', 'range'], rows),
  ].join('\n')
  return { rows: ratios, text }
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

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = process.env.BENCH_BEFORE
  console.log(
    process.argv.includes('--before-after') && root ? (await runBeforeAfter(root)).text : await runCore(),
  )
}
