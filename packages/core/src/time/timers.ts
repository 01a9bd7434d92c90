/**
 * The one family of timers in core: every class that waits takes its time from a `Timers` (or the part of one it
 * uses), never from the globals directly, so that each says which time it waits on and a test can drive it. Three
 * sets exist:
 * - `PLATFORM_TIMERS` (here): the application's time, the platform's timers looked up at each call, so that a
 *   test's fake timers drive them (slowDown's delays, ConcurrencyLimiter's release retries);
 * - `PLATFORM_STEADY_TIMERS` (here): the same on the platform's steady clock, for the waits for reserved slots;
 * - `REAL_TIMERS` (real-timers.ts): real time even under a test's fake timers, for the waits on a store's answer
 *   (a call's `timeout`, a grouped Redis flight), since a store answers in real time.
 */

/**
 * The timers a delay runs on (slowDown's `timers` option): the platform's by default, a test's driven ones
 * otherwise. The part of `Timers` that waits on a clock.
 */
export interface DelayTimers {
  /** The time now, ms (epoch or any steady origin: only differences matter). */
  now(): number
  setTimeout(callback: () => void, ms: number): unknown
  clearTimeout(timer: unknown): void
}

/** Every timer core waits with: a clock, timeouts, and a run after the event loop's next read of sockets. */
export interface Timers extends DelayTimers {
  setImmediate(callback: () => void): void
}

/**
 * The platform's timers, looked up at each call: a test's fake timers (`vi.useFakeTimers()`) drive them, as they
 * drive express-slow-down's. Unlike the store's waits (real-timers.ts), these are the application's time.
 */
export const PLATFORM_TIMERS: Timers = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (timer) => clearTimeout(timer as Parameters<typeof clearTimeout>[0]),
  setImmediate: (callback) => {
    const host = globalThis as { setImmediate?: (callback: () => void) => unknown }
    if (typeof host.setImmediate === 'function') host.setImmediate(callback)
    else setTimeout(callback, 0)
  },
}

/**
 * The platform's timers on its steady clock (`performance.now()`, looked up at each call), for waits that a jump of
 * the wall clock must not move: the waits for reserved slots, whose slots the store's clock decides.
 * A test's fake timers drive it when they fake `performance` too (vitest's and jest's do by default). Fake timers
 * that fake `setTimeout` but not `performance` would let real time end the waits: `Date.now()`, which they fake
 * or leave as it is, is read instead.
 * NOTE: in whole ms, as `Date.now()`: timers truncate a fraction of a ms, and would fire before their time.
 */
export const PLATFORM_STEADY_TIMERS: DelayTimers = {
  now: () => {
    const host = globalThis as {
      performance?: { now?: () => number }
      setTimeout: { clock?: { methods?: readonly string[] } }
    }
    const faked = host.setTimeout.clock
    const steady = faked === undefined || faked.methods?.includes('performance') === true
    const clock = host.performance
    return steady && typeof clock?.now === 'function' ? Math.floor(clock.now()) : Date.now()
  },
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (timer) => clearTimeout(timer as Parameters<typeof clearTimeout>[0]),
}

/** Lets the process end while `timer` is pending, where the platform can (Node, Bun, Deno). */
export function unref(timer: unknown): void {
  ;(timer as { unref?: () => unknown } | undefined)?.unref?.()
}
