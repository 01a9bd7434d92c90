/**
 * Issue 24: `limiter.wait()` from several real Node processes sharing one Redis key reserves exactly the limit
 * per window: the slots, in the Redis server's time, never come closer than the rule allows, and (every call
 * being queued at once) follow one another exactly at the rule's spacing. Counts and slots, never timings.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { redisEnvironment } from './support/redis.js'
import { uniquePrefix } from './support/redis-store-suite.js'
import { WORKER_EXEC_ARGV, workerBundle } from './support/worker-bundle.js'

interface Slot {
  at: number
  delay: number
  resolvedAt: number
  error?: string
}

const WORKER = join(import.meta.dirname, 'support', 'wait-worker.ts')
const children: ChildProcess[] = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL')
})

/** Forks `processes` workers, starts them together, and answers each one's slots in its call order. */
async function run(processes: number, calls: number, rule: string, leave = 0, then = 0): Promise<Slot[][]> {
  const { standalonePort } = redisEnvironment()
  const prefix = uniquePrefix()
  const worker = await workerBundle(WORKER)
  const workers = Array.from({ length: processes }, () => {
    const args = [
      String(standalonePort),
      prefix,
      'api',
      String(calls),
      rule,
      '0',
      String(leave),
      String(then),
    ]
    const child = fork(worker, args, {
      execArgv: WORKER_EXEC_ARGV,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    children.push(child)
    const message = (type: string) =>
      new Promise<{ slots: Slot[] }>((resolve, reject) => {
        child.on('message', (reply: { type: string; slots: Slot[] }) => reply.type === type && resolve(reply))
        child.once('exit', (code) => reject(new Error(`worker exited with ${code} before '${type}'`)))
      })
    return { child, ready: message('ready'), done: message('done') }
  })
  await Promise.all(workers.map((worker) => worker.ready))
  for (const worker of workers) worker.child.send({ type: 'go' })
  return (await Promise.all(workers.map((worker) => worker.done))).map((reply) => reply.slots)
}

describe('wait() across processes on one Redis key (issue 24)', () => {
  it('GCRA, 20 per second: 4 processes × 15 calls get 60 slots exactly 50 ms apart, in call order per process', async () => {
    const perProcess = await run(4, 15, 'gcra:20:1000')
    for (const slots of perProcess) {
      expect(slots.filter((slot) => slot.error !== undefined)).toEqual([])
      // First come, first served within a process: the calls' slots in call order.
      const ats = slots.map((slot) => slot.at)
      expect(ats).toEqual([...ats].sort((a, b) => a - b))
    }
    const all = perProcess
      .flat()
      .map((slot) => slot.at)
      .sort((a, b) => a - b)
    expect(all).toHaveLength(60)
    // Never closer than the rule allows, and (all queued at once) never further: exactly the limit per window.
    const gaps = all.slice(1).map((at, i) => at - all[i]!)
    expect(new Set(gaps)).toEqual(new Set([50]))
    // Most waited: only the first slot was free at once.
    expect(perProcess.flat().filter((slot) => slot.delay > 0).length).toBeGreaterThanOrEqual(59)
  })

  it('sliding window log, 5 per 400 ms: 3 processes × 10 calls get exactly 5 slots per window, never more', async () => {
    const perProcess = await run(3, 10, 'log:5:400')
    const all = perProcess
      .flat()
      .map((slot) => {
        expect(slot.error).toBeUndefined()
        return slot.at
      })
      .sort((a, b) => a - b)
    expect(all).toHaveLength(30)
    // Never more than 5 in any window (t − 400, t]; and (all queued at once) every slot is as early as that
    // allows: the slot 5 places later is exactly one window after it.
    for (const end of all)
      expect(all.filter((at) => at > end - 400 && at <= end).length).toBeLessThanOrEqual(5)
    expect(all.slice(5).map((at, i) => at - all[i]!)).toEqual(Array(25).fill(400))
  })

  it('GCRA, 100 per second: 4 processes × 25 waiters, about 60 % leaving, then 10 more calls each: never two calls on one slot (issue 32)', async () => {
    const perProcess = await run(4, 25, 'gcra:100:1000', 60, 10)
    const left = perProcess.flat().filter((slot) => slot.error !== undefined)
    expect(left.length).toBeGreaterThan(30)
    const all = perProcess
      .flat()
      .filter((slot) => slot.error === undefined)
      .map((slot) => slot.at)
      .sort((a, b) => a - b)
    expect(all).toHaveLength(140 - left.length)
    // Slots 10 ms apart at the closest: a slot a waiter gave back while later ones still waited stays empty.
    const gaps = all.slice(1).map((at, i) => at - all[i]!)
    expect(gaps.filter((gap) => gap < 10)).toEqual([])
  })
})
