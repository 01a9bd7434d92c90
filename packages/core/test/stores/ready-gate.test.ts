import { describe, expect, it } from 'vitest'
import { isShed } from '../../src/stores/call-bound.js'
import type { RedisScriptRunner } from '../../src/stores/redis/clients/index.js'
import { ReadyGate } from '../../src/stores/redis/ready-gate.js'

/** Timers the test drives: timeouts fire on `advance`, immediates on `turn` (the end of a turn of the loop). */
function drivenTimers() {
  let now = 0
  let next = 1
  const timeouts = new Map<number, { at: number; callback: () => void }>()
  let immediates: (() => void)[] = []
  return {
    timers: {
      now: () => now,
      setTimeout: (callback: () => void, ms: number) => {
        timeouts.set(next, { at: now + ms, callback })
        return next++
      },
      clearTimeout: (id: unknown) => void timeouts.delete(id as number),
      setImmediate: (callback: () => void) => void immediates.push(callback),
    },
    pending: () => timeouts.size,
    advance(ms: number) {
      now += ms
      for (const [id, { at, callback }] of [...timeouts]) {
        if (at > now) continue
        timeouts.delete(id)
        callback()
      }
    },
    turn() {
      const due = immediates
      immediates = []
      for (const callback of due) callback()
    },
  }
}

/** A runner whose client connects when the test says: `whenReady` as ioredis' runner answers it. */
function connectingRunner() {
  let ready = false
  let opened: () => void = () => {}
  const waiting = new Promise<void>((resolve) => {
    opened = resolve
  })
  const runner = {
    family: 'test',
    cluster: true,
    evalSha: async () => [],
    eval: async () => [],
    del: async () => 0,
    whenReady: () => (ready ? undefined : waiting),
  } satisfies RedisScriptRunner
  return {
    runner,
    connect() {
      ready = true
      opened()
    },
  }
}

const settled = (promise: Promise<unknown>) =>
  promise.then(
    () => 'ready',
    (error: unknown) => error,
  )

describe('ReadyGate', () => {
  it('holds calls while the client connects and lets them all go, in order, once it is ready; then holds nothing', async () => {
    const { timers, pending } = drivenTimers()
    const { runner, connect } = connectingRunner()
    const gate = new ReadyGate(runner, 2_000, timers)
    const order: number[] = []
    const held = [1, 2, 3].map((n) => gate.wait(10)!.then(() => order.push(n)))
    connect()
    await Promise.all(held)
    expect(order).toEqual([1, 2, 3])
    expect(pending()).toBe(0)
    expect(gate.wait(10)).toBeUndefined()
  })

  it('gives up readyTimeout after the turn that made the first call, once the sockets were read again: every call held gets one error', async () => {
    const driven = drivenTimers()
    const { runner } = connectingRunner()
    const gate = new ReadyGate(runner, 2_000, driven.timers)
    const first = settled(gate.wait(10)!)
    // The burst that made the call took 5 s: none of it counts.
    driven.advance(5_000)
    const second = settled(gate.wait(10)!)
    driven.turn() // the burst is over: the bound is armed
    driven.advance(1_999)
    driven.turn()
    driven.advance(1)
    expect(driven.pending()).toBe(0)
    // Expired: given up only after the sockets were read once more.
    driven.turn()
    const [a, b] = await Promise.all([first, second])
    expect(a).toBe(b)
    expect(a).toMatchObject({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' })
    expect(String(a)).toContain('The Redis client (test) was not ready within 2000 ms')
    // The next call begins a new hold.
    expect(gate.wait(10)).toBeInstanceOf(Promise)
  })

  it('past maxWaiting calls held, a call is shed, retrying once the hold would end', async () => {
    const driven = drivenTimers()
    const { runner, connect } = connectingRunner()
    const gate = new ReadyGate(runner, 2_000, driven.timers)
    const held = [gate.wait(2)!, gate.wait(2)!]
    const shed = await settled(gate.wait(2)!)
    expect(isShed(shed)).toBe(true)
    expect(shed).toMatchObject({ retryAfterMs: 2_000 })
    connect()
    await Promise.all(held)
  })

  it('a runner without whenReady (or a client that is ready) is never held', () => {
    const { runner } = connectingRunner()
    const { whenReady: _, ...without } = runner
    expect(new ReadyGate(without, 2_000).wait(10)).toBeUndefined()
  })
})
