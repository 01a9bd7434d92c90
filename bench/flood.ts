/**
 * 1,000,000 distinct keys through the MemoryStore (maxKeys 100k, then 1M): retained heap, and the longest
 * event-loop pause while the background sweep drops a million expired keys (perf_hooks.monitorEventLoopDelay).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { MemoryStore, RateLimiter, slidingWindowCounter } from '@ratewindow/core'
import { table } from './stats.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void
const retained = () => {
  gc()
  return process.memoryUsage().heapUsed
}

async function flood(maxKeys: number): Promise<string[]> {
  let now = 1_700_000_000_000
  const store = new MemoryStore({ maxKeys, clock: () => now, sweepInterval: 50 })
  const limiter = new RateLimiter({ rules: slidingWindowCounter({ limit: 100, window: '1m' }), store })
  const before = retained()
  for (let i = 0; i < 1_000_000; i++) await limiter.limit(`203.0.${i >> 8}.${i & 255}:${i}`)
  const heap = retained() - before
  const held = store.size
  // Let every key expire, then watch the event loop while the sweep (every 50 ms, in slices) drops them.
  now += 3 * 60_000
  const delay = monitorEventLoopDelay({ resolution: 1 })
  delay.enable()
  const started = performance.now()
  while (store.size > 0 && performance.now() - started < 30_000)
    await new Promise((resolve) => setTimeout(resolve, 5))
  delay.disable()
  store.close()
  return [
    maxKeys.toLocaleString('en-US'),
    held.toLocaleString('en-US'),
    `${(heap / 2 ** 20).toFixed(1)} MiB`,
    `${(heap / held).toFixed(0)} B`,
    `${(performance.now() - started).toFixed(0)} ms`,
    `${(delay.max / 1e6).toFixed(1)} ms`,
  ]
}

export async function runFlood(): Promise<string> {
  const rows = [await flood(100_000), await flood(1_000_000)]
  return table(
    ['maxKeys', 'keys held', 'retained heap', 'per key', 'sweep of all', 'longest event-loop pause'],
    rows,
  )
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await runFlood())
