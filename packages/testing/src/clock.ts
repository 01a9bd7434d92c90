import {
  type BlockedCacheOptions,
  type CircuitBreakerOptions,
  type Duration,
  fixedWindow,
  MemoryStore,
  type MemoryStoreOptions,
} from '@ratewindow/core'

/**
 * A clock the test drives by hand. Give `clock.read` to everything that keeps time: the stores' `clock` option
 * (`MemoryStore`, `RedisStore`, `SyncedStore`), and the limiter's `circuitBreaker.clock` and `blockedCache.clock`
 * (`clock.circuitBreaker()`, `clock.blockedCache()`). Then `advance('1m')` moves all of them at once, without
 * fake timers and without waiting.
 * @example
 * const clock = new TestClock()
 * const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1m' }), store: clock.memoryStore() })
 * await limiter.limit('k') // allowed
 * clock.advance('1m') // the window has passed
 */
export class TestClock {
  /** The time now, epoch ms. */
  now: number

  /** @param start epoch ms or a `Date`. @default 1_700_000_000_000 (November 2023) */
  constructor(start: number | Date = 1_700_000_000_000) {
    this.now = toEpoch(start, 'start')
  }

  /** The clock as a function, for `clock` options: `new MemoryStore({ clock: clock.read })`. */
  readonly read = (): number => this.now

  /** Moves to `time` (epoch ms or a `Date`); backwards too, to test a clock that steps back. */
  set(time: number | Date): this {
    this.now = toEpoch(time, 'time')
    return this
  }

  /**
   * Moves forward by `duration`: ms, or a string such as `'30s'`, `'1m'`, `'15 minutes'`. A negative number of ms
   * moves back (a clock that steps back).
   */
  advance(duration: Duration): this {
    this.now += durationMs(duration)
    return this
  }

  /** A `MemoryStore` on this clock. */
  memoryStore(options: Omit<MemoryStoreOptions, 'clock'> = {}): MemoryStore {
    return new MemoryStore({ ...options, clock: this.read })
  }

  /** The limiter's `circuitBreaker` option on this clock: its cooldown passes when the clock advances. */
  circuitBreaker(options: Omit<CircuitBreakerOptions, 'clock'> = {}): CircuitBreakerOptions {
    return { ...options, clock: this.read }
  }

  /** The limiter's `blockedCache` option on this clock (turns the cache on). */
  blockedCache(options: Omit<BlockedCacheOptions, 'clock'> = {}): BlockedCacheOptions {
    return { ...options, clock: this.read }
  }
}

function toEpoch(value: unknown, what: string): number {
  const ms = value instanceof Date ? value.getTime() : value
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new TypeError(
      `TestClock: \`${what}\` must be epoch milliseconds or a Date; received ${String(value)}.`,
    )
  }
  return ms
}

/** Milliseconds of a duration, parsed as every ratewindow option parses it; whole numbers pass as they are. */
function durationMs(duration: Duration): number {
  if (typeof duration === 'number' && Number.isSafeInteger(duration)) return duration
  return fixedWindow({ limit: 1, window: duration }).windowMs
}
