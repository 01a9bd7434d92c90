/**
 * Issue 24: several processes calling `limiter.wait()` on one Redis key. Each process (test/support/wait-worker.ts,
 * a RateLimiter on its own RedisStore and ioredis client) sends all its calls at once; the store reserves each
 * call's slot in the Redis server's time. Reported: the slots admitted per window against the limit (by the
 * reserved times, and by the times the calls actually went), and the lateness of each call after its slot
 * (median, p99, max), which is the timer's resolution plus the event loop's delay on a shared machine.
 * Run: pnpm --filter @ratewindow/bench waiting (under the bench lock)
 */
import { type ChildProcess, fork } from 'node:child_process'
import { join } from 'node:path'
import { RedisServer } from '../test/support/redis-server.js'
import { median, table } from './stats.js'

interface Slot {
  at: number
  delay: number
  resolvedAt: number
  error?: string
}

const WORKER = join(import.meta.dirname, '..', 'test', 'support', 'wait-worker.ts')

/** Forks the workers, starts them together, and answers every call's slot. */
async function run(
  port: number,
  processes: number,
  calls: number,
  rule: string,
  prefix: string,
  spread: number,
) {
  const children: ChildProcess[] = []
  try {
    const workers = Array.from({ length: processes }, () => {
      const child = fork(WORKER, [String(port), prefix, 'api', String(calls), rule, String(spread)], {
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      })
      children.push(child)
      const message = (type: string) =>
        new Promise<{ slots: Slot[] }>((resolve, reject) => {
          child.on(
            'message',
            (reply: { type: string; slots: Slot[] }) => reply.type === type && resolve(reply),
          )
          child.once('exit', (code) => reject(new Error(`worker exited with ${code} before '${type}'`)))
        })
      return { child, ready: message('ready'), done: message('done') }
    })
    await Promise.all(workers.map((worker) => worker.ready))
    for (const worker of workers) worker.child.send({ type: 'go' })
    return (await Promise.all(workers.map((worker) => worker.done))).flatMap((reply) => reply.slots)
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill()
  }
}

/** The most of `times` in any window (t − window, t]. */
function mostInAnyWindow(times: readonly number[], window: number): number {
  const sorted = [...times].sort((a, b) => a - b)
  let most = 0
  let start = 0
  for (let end = 0; end < sorted.length; end++) {
    while (sorted[start]! <= sorted[end]! - window) start++
    most = Math.max(most, end - start + 1)
  }
  return most
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

interface Scenario {
  name: string
  rule: string
  limit: number
  window: number
  processes: number
  calls: number
  /** Ms between a process's calls; 0: all at once. */
  spread: number
}

const GCRA_50 = { name: 'GCRA 50/s, burst 1', rule: 'gcra:50:1000', limit: 50, window: 1_000 }
const LOG_20 = { name: 'log 20 per 500 ms', rule: 'log:20:500', limit: 20, window: 500 }
/** Every call sent at once, and the calls arriving at twice the limit's rate. */
const SCENARIOS: Scenario[] = [
  { ...GCRA_50, processes: 4, calls: 100, spread: 0 },
  { ...GCRA_50, processes: 4, calls: 100, spread: 40 },
  {
    name: 'GCRA 200/s, burst 1',
    rule: 'gcra:200:1000',
    limit: 200,
    window: 1_000,
    processes: 8,
    calls: 150,
    spread: 0,
  },
  { ...LOG_20, processes: 4, calls: 60, spread: 0 },
  { ...LOG_20, processes: 4, calls: 60, spread: 50 },
]

export async function runWaiting(): Promise<string> {
  const server = await RedisServer.start()
  const rows: string[][] = []
  try {
    let n = 0
    for (const scenario of SCENARIOS) {
      const slots = await run(
        server.port,
        scenario.processes,
        scenario.calls,
        scenario.rule,
        `bw${n++}:`,
        scenario.spread,
      )
      const failed = slots.filter((slot) => slot.error !== undefined).length
      const served = slots.filter((slot) => slot.error === undefined)
      const lateness = served.map((slot) => slot.resolvedAt - slot.at)
      const span = Math.max(...served.map((slot) => slot.at)) - Math.min(...served.map((slot) => slot.at))
      rows.push([
        scenario.name,
        `${scenario.processes} × ${scenario.calls}`,
        scenario.spread === 0 ? 'at once' : `every ${scenario.spread} ms`,
        String(served.length),
        String(failed),
        `${scenario.limit}`,
        String(
          mostInAnyWindow(
            served.map((slot) => slot.at),
            scenario.window,
          ),
        ),
        String(
          mostInAnyWindow(
            served.map((slot) => slot.resolvedAt),
            scenario.window,
          ),
        ),
        `${(span / 1000).toFixed(2)} s`,
        `${median(lateness)} / ${percentile(lateness, 99)} / ${Math.max(...lateness)}`,
      ])
    }
  } finally {
    await server.stop()
  }
  return [
    "Processes (test/support/wait-worker.ts: a RateLimiter on its own RedisStore and ioredis client each) call `wait()` on one key of one redis-server, every call sent at once, or each process sending one every few ms (together twice the limit's rate). `slots` are the reserved times (Redis server time); `went` the times the calls resolved in their processes. `late` is each call's resolve time minus its slot, in ms (median / p99 / max): the timer's resolution and the event loop's delay on a shared 2-core machine, never early.",
    '',
    table(
      [
        'rule',
        'processes × calls',
        'calls sent',
        'served',
        'rejected',
        'limit per window',
        'most slots in any window',
        'most went in any window',
        'slots span',
        'late ms (median / p99 / max)',
      ],
      rows,
    ),
  ].join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await runWaiting())
