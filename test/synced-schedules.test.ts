import { fixedWindow, RateLimiter, SyncedStore } from '@ratewindow/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { applySync, NO_CLIENT, type SyncState } from './support/sync-twin.js'

/**
 * A runner whose round trips the test schedules: each script waits to be executed (its effect on the shared
 * state), then for its reply to be delivered. Any order of requests, sends, executions and replies can be played.
 */
class ScheduledRedis {
  readonly state: SyncState = new Map()
  readonly queued: {
    keys: readonly string[]
    args: readonly (string | number)[]
    done: (reply: number[]) => void
  }[] = []
  readonly executed: { reply: number[]; done: (reply: number[]) => void }[] = []
  readonly runner = {
    run: (_script: unknown, keys: readonly string[], args: readonly (string | number)[]) =>
      new Promise<number[]>((done) => this.queued.push({ keys, args, done })),
  }
  execute(index: number): void {
    const [call] = this.queued.splice(index % this.queued.length, 1)
    if (call) this.executed.push({ reply: applySync(this.state, call.keys, call.args), done: call.done })
  }
  deliver(index: number): void {
    const [call] = this.executed.splice(index % this.executed.length, 1)
    call?.done(call.reply)
  }
  async drain(): Promise<void> {
    while (this.queued.length > 0 || this.executed.length > 0) {
      if (this.queued.length > 0) this.execute(0)
      else this.deliver(0)
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
}

const action = fc.oneof(
  fc.record({
    type: fc.constant('request' as const),
    who: fc.nat(),
    key: fc.nat(),
    cost: fc.integer({ min: 1, max: 3 }),
  }),
  fc.record({ type: fc.constant('sync' as const), who: fc.nat() }),
  fc.record({ type: fc.constant('execute' as const), which: fc.nat() }),
  fc.record({ type: fc.constant('deliver' as const), which: fc.nat() }),
)

type Action = typeof action extends fc.Arbitrary<infer A> ? A : never

/**
 * Runs `actions` against `processes` SyncedStores on one scheduled Redis, then checks the documented bound for
 * every key: limit + (P − 1) × max(maxPending, the largest cost).
 */
async function checkSchedule(
  processes: number,
  limit: number,
  maxPending: number,
  keys: number,
  actions: readonly Action[],
  maxKeys?: number,
): Promise<void> {
  const redis = new ScheduledRedis()
  const stores = Array.from(
    { length: processes },
    () =>
      new SyncedStore({
        client: NO_CLIENT,
        runner: redis.runner,
        clock: () => 1_700_000_000_000,
        interval: '1h',
        maxPending,
        ...(maxKeys === undefined ? {} : { maxKeys }),
        onError: () => {},
      }),
  )
  const limiters = stores.map(
    (store) => new RateLimiter({ rules: fixedWindow({ limit, window: '1h' }), store, timeout: '1h' }),
  )
  const admitted = new Array<number>(keys).fill(0)
  const requests: Promise<void>[] = []
  for (const step of actions) {
    if (step.type === 'request') {
      requests.push(
        limiters[step.who % processes]!.limit(`k${step.key % keys}`, { cost: step.cost }).then((result) => {
          if (result.allowed) admitted[step.key % keys]! += step.cost
        }),
      )
    } else if (step.type === 'sync') void stores[step.who % processes]!.sync()
    else if (step.type === 'execute') redis.execute(step.which)
    else redis.deliver(step.which)
    await new Promise((resolve) => setImmediate(resolve))
  }
  await redis.drain()
  await Promise.all(requests)
  for (const count of admitted)
    expect(count).toBeLessThanOrEqual(limit + (processes - 1) * Math.max(maxPending, 3))
}

describe('SyncedStore under adversarial schedules of round trips', () => {
  it('admits at most limit + (P − 1) × max(maxPending, cost) per key and window, in any order of sends, executions and replies (several keys per sync)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 5, max: 60 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 3 }),
        fc.array(action, { minLength: 50, maxLength: 400 }),
        (processes, limit, maxPending, keys, actions) =>
          checkSchedule(processes, limit, maxPending, keys, actions),
      ),
      { numRuns: 300 },
    )
  })
})

describe('SyncedStore under key churn (maxKeys) and adversarial schedules', () => {
  it('keeps the same bound when keys are evicted and come back: limit + (P − 1) × max(maxPending, cost), the limit alone for one process', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 5, max: 30 }),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        fc.array(action, { minLength: 50, maxLength: 300 }),
        (processes, limit, maxPending, keys, maxKeys, actions) =>
          checkSchedule(processes, limit, maxPending, keys, actions, maxKeys),
      ),
      { numRuns: 300 },
    )
  })
})
