/**
 * The timers of the platform, as they were when this module loaded, for the limiter's own waits (a store call's
 * `timeout`, a grouped Redis flight): they must run on real time, since a store answers in real time. Under the
 * fake timers of a test (`vi.useFakeTimers()`, `jest.useFakeTimers()`) a faked `setTimeout` would never fire
 * unless the test advanced it, and every request would hang. Counting follows the test's clock instead: the
 * memory stores read `Date.now()` at each call.
 *
 * Fake timers installed before this module loaded (a setup file) are seen through: @sinonjs/fake-timers, which
 * vitest and jest use, keeps the original of each faked function on its clock as `_<name>`.
 */

import { type Timers, unref } from './timers.js'

type Timer = { unref?: () => unknown }

function original<F>(current: F, name: string): F {
  const clock = (current as { clock?: Record<string, unknown> } | undefined)?.clock
  const saved = clock?.[`_${name}`]
  return typeof saved === 'function' ? (saved as F) : current
}

const timers = globalThis as unknown as {
  setTimeout: (callback: () => void, ms: number) => Timer
  clearTimeout: (timer: Timer | undefined) => void
  setImmediate?: (callback: () => void) => unknown
}

/** `setTimeout` on real time, unref'd where the platform can (a pending wait never keeps a process alive). */
export const realSetTimeout: (callback: () => void, ms: number) => Timer = (() => {
  const set = original(timers.setTimeout, 'setTimeout')
  return (callback, ms) => {
    const timer = set(callback, ms)
    unref(timer)
    return timer
  }
})()

export const realClearTimeout: (timer: Timer | undefined) => void = original(
  timers.clearTimeout,
  'clearTimeout',
)

/** Runs `f` after the event loop's next read of sockets (Node, Bun and Deno have setImmediate), on real time. */
export const realSetImmediate: (callback: () => void) => void = (() => {
  const immediate =
    typeof timers.setImmediate === 'function' ? original(timers.setImmediate, 'setImmediate') : undefined
  return immediate === undefined
    ? (callback) => void realSetTimeout(callback, 0)
    : (callback) => void immediate(callback)
})()

/**
 * For a timeout's message: when a test's fake timers replace `setImmediate` or `setTimeout`, a Redis client that
 * schedules its own work with them (node-redis writes on `setImmediate`) sends nothing, and every call times out.
 */
export function fakeTimersHint(): string {
  const host = globalThis as unknown as Record<string, { clock?: unknown } | undefined>
  const faked = ['setImmediate', 'setTimeout'].filter((name) => host[name]?.clock !== undefined)
  if (faked.length === 0) return ''
  return ` Fake timers replace ${faked.join(' and ')} in this process: a Redis client that schedules its writes with them (node-redis uses setImmediate) sends nothing while they are faked. Fake only the clock, e.g. vi.useFakeTimers({ toFake: ['Date'] }) or jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] }) (docs/testing.md).`
}

/** The platform's steady clock as it was when this module loaded (ms from any origin). */
const realNow: () => number = (() => {
  const clock = globalThis.performance
  return typeof clock?.now === 'function' ? clock.now.bind(clock) : () => Date.now()
})()

/** The wall clock's epoch ms when this module loaded, minus the steady clock's reading then. */
const steadyOrigin = Date.now() - realNow()

/**
 * Epoch ms that a step of the wall clock does not move (NTP, a resumed VM): the wall clock when this module loaded
 * plus the steady clock's time since, in whole ms like `Date.now()`.
 */
export function steadyEpochNow(): number {
  return Math.floor(steadyOrigin + realNow())
}

/**
 * The real timers as one `Timers` (timers.ts). NOTE: called as methods of this object, so each calls the platform's
 * function without a `this` of its own: workerd refuses a `clearTimeout` called on another object (Illegal
 * invocation), and a store call whose timer cannot be cleared would never answer before its timeout.
 */
export const REAL_TIMERS: Timers = {
  now: () => realNow(),
  setTimeout: (callback, ms) => realSetTimeout(callback, ms),
  clearTimeout: (timer) => realClearTimeout(timer as Timer | undefined),
  setImmediate: (callback) => realSetImmediate(callback),
}
