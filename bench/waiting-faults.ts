/**
 * Issue 32, item 4: what a crashed process and a restarted Redis cost `wait()`, on one redis-server and real
 * processes (test/support/wait-worker.ts), with the default `reservationHorizon` and a short one.
 * - A worker killed while its calls wait: its reserved slots stay empty (the store cannot know it died).
 * - Redis restarted without persistence while calls wait: the queue reserved before lives on in the workers, the
 *   store starts empty, and new callers start beside the old queue.
 * Figures for docs/waiting.md. Run: pnpm --filter @ratewindow/bench waiting-faults (briefly: about 40 s).
 */
import { type ChildProcess, fork } from 'node:child_process'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { table } from './stats.js'

const WORKER = join(import.meta.dirname, '..', 'test', 'support', 'wait-worker.ts')

interface Slot {
  at?: number
  resolvedAt?: number
  error?: string
}

interface Worker {
  child: ChildProcess
  /** The slots reserved so far (`decided` and allowed), in the server's time. */
  reserved: number[]
  decided: number
  done: Promise<Slot[]>
}

const children: ChildProcess[] = []

function start(port: number, prefix: string, calls: number, rule: string, horizon?: string): Worker {
  const args = [
    String(port),
    prefix,
    'api',
    String(calls),
    rule,
    '0',
    '0',
    '0',
    ...(horizon ? [horizon] : []),
  ]
  const child = fork(WORKER, args, {
    execArgv: ['--conditions=@ratewindow/source', '--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  children.push(child)
  const worker: Worker = { child, reserved: [], decided: 0, done: Promise.resolve([]) }
  const ready = new Promise<void>((resolve) => {
    child.on('message', (message: { type: string; at: number; allowed: boolean }) => {
      if (message.type === 'ready') resolve()
      if (message.type !== 'decided') return
      worker.decided++
      if (message.allowed) worker.reserved.push(message.at)
    })
  })
  worker.done = new Promise((resolve) => {
    child.on('message', (message: { type: string; slots: Slot[] }) => {
      if (message.type === 'done') resolve(message.slots)
    })
    child.once('exit', () => resolve([]))
  })
  void ready.then(() => child.send({ type: 'go' }))
  return worker
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10))
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The most of `times` in any window (t − window, t]. */
function mostInAnyWindow(times: readonly number[], window: number): number {
  const sorted = [...times].sort((a, b) => a - b)
  let most = 0
  let first = 0
  for (let end = 0; end < sorted.length; end++) {
    while (sorted[first]! <= sorted[end]! - window) first++
    most = Math.max(most, end - first + 1)
  }
  return most
}

/** How long (ms) from the first start with more than `limit` in the window (t − window, t] to the last. */
function timeOverLimit(times: readonly number[], window: number, limit: number): number {
  const sorted = [...times].sort((a, b) => a - b)
  const over = sorted.filter((end) => sorted.filter((t) => t > end - window && t <= end).length > limit)
  return over.length === 0 ? 0 : over[over.length - 1]! - over[0]!
}

/** Two workers queue 100 calls each at 20/s; one is killed 1 s later. */
async function crash(port: number, horizon: string | undefined, prefix: string): Promise<string[]> {
  const a = start(port, prefix, 100, 'gcra:20:1000', horizon)
  const b = start(port, prefix, 100, 'gcra:20:1000', horizon)
  await until(() => a.decided === 100 && b.decided === 100)
  await sleep(1_000)
  const client = new Redis({ port })
  const [seconds, micros] = await client.time()
  const now = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000)
  a.child.kill('SIGKILL')
  const lost = a.reserved.filter((at) => at > now).length
  // A call made right after the kill waits behind the whole queue, the dead worker's slots included.
  const c = start(port, prefix, 1, 'gcra:20:1000', horizon)
  const [slot] = await c.done
  const [served] = [(await b.done).filter((each) => each.error === undefined).length]
  client.disconnect()
  return [
    horizon ?? "'1m' (default)",
    `${a.reserved.length + b.reserved.length} of 200`,
    String(lost),
    `${((lost * 50) / 1_000).toFixed(1)} s`,
    slot?.at === undefined
      ? 'refused at once (beyond the horizon)'
      : `${((slot.at - now) / 1_000).toFixed(1)} s`,
    String(served),
  ]
}

/** A worker queues 100 calls at 10/s; Redis restarts (no persistence) 1 s later; a new worker sends 20. */
async function restart(server: RedisServer, horizon: string | undefined, prefix: string): Promise<string[]> {
  const a = start(server.port, prefix, 100, 'gcra:10:1000', horizon)
  await until(() => a.decided === 100)
  await sleep(1_000)
  await server.kill()
  await server.restart()
  const c = start(server.port, prefix, 20, 'gcra:10:1000', horizon)
  const slots = [...(await a.done), ...(await c.done)]
  const starts = slots.flatMap((slot) => (slot.resolvedAt === undefined ? [] : [slot.resolvedAt]))
  return [
    horizon ?? "'1m' (default)",
    `${a.reserved.length} of 100`,
    String(mostInAnyWindow(starts, 1_000)),
    `${(timeOverLimit(starts, 1_000, 10) / 1_000).toFixed(1)} s`,
  ]
}

export async function runWaitingFaults(): Promise<string> {
  const server = await RedisServer.start()
  const crashes: string[][] = []
  const restarts: string[][] = []
  try {
    for (const [i, horizon] of [undefined, '3s'].entries()) {
      crashes.push(await crash(server.port, horizon, `crash${i}:`))
      restarts.push(await restart(server, horizon, `restart${i}:`))
    }
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill()
    await server.stop()
  }
  return [
    'A worker killed while its calls wait (GCRA 20/s, burst 1; two workers queue 100 calls each at once, one is killed 1 s later):',
    '',
    table(
      [
        'reservationHorizon',
        'calls reserved',
        'slots the killed worker held ahead',
        'limit left unused',
        'a call made just after the kill waited',
        "the other worker's calls served",
      ],
      crashes,
    ),
    '',
    'Redis restarted without persistence while calls wait (GCRA 10/s, burst 1; a worker queues 100 calls at once, Redis is killed and restarted 1 s later, a new worker then sends 20 calls; starts counted in the processes):',
    '',
    table(
      ['reservationHorizon', 'calls reserved', 'most starts in any second', 'over the limit for'],
      restarts,
    ),
  ].join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await runWaitingFaults())
