/**
 * MemoryStore's default clock: epoch ms on the steady clock, or a test's fake `Date` while one is installed; and
 * the check of what any clock returns.
 */
import { steadyEpochNow } from './real-timers.js'

/** `Date` as this module found it: another one since is a test's (`vi.setSystemTime()` alone swaps in its own). */
const LOADED_DATE = Date

/**
 * The default clock: epoch ms on the steady clock, so that a step of the wall clock while calls wait for reserved
 * slots lets no new caller start beside them (a 1 s step forward gave 20 starts in one
 * second for a limit of 10). A test's fake `Date` drives it instead (`vi.useFakeTimers()`, `vi.setSystemTime()`),
 * looked up at each call so that fake timers installed later apply.
 */
export function defaultEpochNow(): number {
  return Date !== LOADED_DATE || (Date as { clock?: unknown }).clock !== undefined
    ? Date.now()
    : steadyEpochNow()
}

export function isEpochTime(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0
}
