/**
 * The cost of observer hooks and shadow mode on the hot path: `limiter.limit` on a memory store, one key with a
 * limit never reached, ns per decision. Variants run interleaved, each round starting with another one, so that
 * drift of this noisy machine hits them alike; medians of the rounds. CPU only: no network, no store latency.
 */
import { fixedWindow, MemoryStore, RateLimiter, type RateLimiterOptions } from '@ratewindow/core'
import { median, table } from './stats.js'

const OPERATIONS = 200_000
const ROUNDS = 9

type Variant = [string, Partial<RateLimiterOptions>]

let sink = 0
const VARIANTS: Variant[] = [
  ['no observer (the default)', {}],
  ['observer: {} (no callbacks)', { observer: {} }],
  ['onDecision (counts)', { observer: { onDecision: () => void sink++ } }],
  ['onDecision, nearLimit: false', { observer: { onDecision: () => void sink++ }, nearLimit: false }],
  [
    'onDecision + onStoreCall + onBreaker',
    {
      observer: {
        onDecision: () => void sink++,
        onStoreCall: (event) => {
          sink += event.durationMs
        },
        onBreaker: () => void sink++,
      },
    },
  ],
  ['shadow: true (never limited here)', { shadow: true }],
]

function make(options: Partial<RateLimiterOptions>): () => Promise<void> {
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 100_000_000, window: '1h' }),
    store: new MemoryStore(),
    ...options,
  })
  return async () => {
    for (let i = 0; i < OPERATIONS; i++) await limiter.limit('client')
  }
}

export async function runObserve(): Promise<string> {
  const runs = VARIANTS.map(([, options]) => make(options))
  for (const run of runs) await run() // warm-up
  const samples: number[][] = VARIANTS.map(() => [])
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts with another variant: no variant always runs first (or after the same one).
    for (let j = 0; j < runs.length; j++) {
      const i = (round + j) % runs.length
      const start = process.hrtime.bigint()
      await runs[i]!()
      samples[i]!.push(Number(process.hrtime.bigint() - start) / OPERATIONS)
    }
  }
  const base = median(samples[0]!)
  const rows = VARIANTS.map(([name], i) => {
    const ns = median(samples[i]!)
    return [
      name,
      ns.toFixed(0),
      `${ns - base >= 0 ? '+' : ''}${(ns - base).toFixed(0)}`,
      (ns / base).toFixed(3),
    ]
  })
  return [
    `\`limiter.limit\` on a MemoryStore, ns per decision (median of ${ROUNDS} interleaved rounds of ${OPERATIONS.toLocaleString('en-US')}), Node ${process.version}:`,
    '',
    table(['variant', 'ns/op', 'vs default', 'ratio'], rows),
  ].join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await runObserve())
