/**
 * The algorithm comparison shown by `pnpm demo`: the same traffic through each algorithm on a MemoryStore
 * with a driven clock (no waiting), and what each admitted.
 */
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

const LIMIT = 10
const WINDOW = 10_000

export const DEMO_RULES: readonly [string, () => Rule][] = [
  ['fixed window', () => fixedWindow({ limit: LIMIT, window: WINDOW })],
  ['sliding window log', () => slidingWindowLog({ limit: LIMIT, window: WINDOW })],
  ['sliding window counter', () => slidingWindowCounter({ limit: LIMIT, window: WINDOW })],
  ['token bucket', () => tokenBucket({ capacity: LIMIT, refillRate: 1, interval: WINDOW / LIMIT })],
  ['GCRA', () => gcra({ limit: LIMIT, window: WINDOW })],
]

/** Replays request times through one rule on a MemoryStore with a driven clock: what it admitted, and each decision. */
export async function replay(
  rule: Rule,
  times: readonly number[],
): Promise<{ admitted: number[]; decisions: boolean[] }> {
  let now = 0
  const limiter = new RateLimiter({ rules: rule, store: new MemoryStore({ clock: () => now }) })
  const admitted: number[] = []
  const decisions: boolean[] = []
  for (const time of times) {
    now = time
    const { allowed } = await limiter.limit('client')
    decisions.push(allowed)
    if (allowed) admitted.push(time)
  }
  return { admitted, decisions }
}

/** Most admitted in any half-open window (t − windowMs, t]. */
export function worstWindow(admitted: readonly number[], windowMs: number): number {
  let worst = 0
  let start = 0
  for (let end = 0; end < admitted.length; end++) {
    while (admitted[start]! <= admitted[end]! - windowMs) start++
    worst = Math.max(worst, end - start + 1)
  }
  return worst
}

function bar(count: number, scale: number): string {
  return '█'.repeat(Math.round(count * scale)).padEnd(Math.ceil(LIMIT * 2 * scale))
}

/** Prints both scenarios and returns the admitted counts, for tests. */
export async function runSimulation(
  print: (line: string) => void = console.log,
): Promise<Record<string, number[]>> {
  // 1. Boundary burst: 20 requests in the last and first half-second around the 10 s boundary.
  const burst = Array.from({ length: 20 }, (_, i) => 19_500 + i * 50)
  // 2. Steady traffic at 2 requests per second for 40 s: twice the sustainable rate.
  const steady = Array.from({ length: 80 }, (_, i) => 30_000 + i * 500)
  const summary: Record<string, number[]> = {}
  print(
    `Limit: ${LIMIT} requests per ${WINDOW / 1000} s (token bucket: capacity ${LIMIT}, 1 token per second; GCRA: one per second, bursts of ${LIMIT})\n`,
  )
  print('1. Boundary burst: 20 requests within 1 s, across a window boundary')
  for (const [name, make] of DEMO_RULES) {
    const run = await replay(make(), burst)
    const worst = worstWindow(run.admitted, WINDOW)
    summary[name] = [run.admitted.length]
    print(
      `   ${name.padEnd(24)} ${bar(run.admitted.length, 1)} ${run.admitted.length}/20 admitted, ${worst} in one window`,
    )
  }
  print('\n2. Steady traffic: 2 requests per second for 40 s (admitted per 5 s)')
  for (const [name, make] of DEMO_RULES) {
    const run = await replay(make(), steady)
    const buckets = Array.from(
      { length: 8 },
      (_, i) => run.admitted.filter((t) => t >= 30_000 + i * 5_000 && t < 35_000 + i * 5_000).length,
    )
    summary[name]!.push(run.admitted.length)
    const spark = buckets.map((count) => ' ▁▂▃▄▅▆▇█'[Math.min(8, Math.round((count / 10) * 8))]).join('')
    print(
      `   ${name.padEnd(24)} [${spark}] ${buckets.join(' ')}  = ${run.admitted.length}/80, worst window ${worstWindow(run.admitted, WINDOW)}`,
    )
  }
  print(
    '\nThe fixed window lets 2 × the limit through across the boundary; the log never exceeds the limit in',
  )
  print('any window; the counter stays close to it with two integers of state; the bucket allows a burst of')
  print(
    'its capacity, then its refill rate; GCRA admits exactly what the bucket admits with one integer of state.',
  )
  return summary
}
