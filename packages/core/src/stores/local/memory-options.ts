/** MemoryStore's options: their types, names and defaults. */
import type { Duration } from '../../support/duration.js'
import { namesOf } from '../../support/option-names.js'

export interface MemoryStoreOptions {
  /**
   * Current time in epoch ms. Inject one to drive time in tests and simulations. @default the wall clock when the
   * process started plus the steady clock's time since (a step of the wall clock does not move it), or a test's fake
   * `Date` while one is installed (`vi.useFakeTimers()`, `vi.setSystemTime()`), read at each call, even when the store
   * was built before them. To follow a mocked `Date.now` instead, pass `clock: () => Date.now()`
   */
  clock?: () => number
  /**
   * Most client keys held at once. Past it the least recently used key is evicted (its client starts
   * afresh), so a flood of unique keys cannot exhaust memory. @default 100_000
   */
  maxKeys?: number
  /** How often a background sweep drops expired keys (from the store's first use; the timer is unref'd); at most '24d'. @default '1m' */
  sweepInterval?: Duration
}

export const MEMORY_STORE_OPTIONS = namesOf<MemoryStoreOptions>({
  clock: true,
  maxKeys: true,
  sweepInterval: true,
})
/** `MemoryStoreOptions`' defaults, in one place (the `@default` tags above say the same). */
export const MEMORY_STORE_DEFAULTS = {
  maxKeys: 100_000,
  sweepInterval: '1m',
} as const satisfies MemoryStoreOptions
