/**
 * The one family of timers in core: every class that waits takes its time from a `Timers` (or the part of one it
 * uses), never from the globals directly, so that each says which time it waits on and a test can drive it. Two
 * sets exist:
 * - `PLATFORM_TIMERS` (here): the application's time, the platform's timers looked up at each call, so that a
 *   test's fake timers drive them (slowDown's delays, the waits for reserved slots, ConcurrencyLimiter's release
 *   retries);
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

/** Lets the process end while `timer` is pending, where the platform can (Node, Bun, Deno). */
export function unref(timer: unknown): void {
  ;(timer as { unref?: () => unknown } | undefined)?.unref?.()
}
