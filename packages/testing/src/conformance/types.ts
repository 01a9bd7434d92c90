/** The public types of the conformance suite: the store under test and the runner's test functions. */
import type { Store } from '@ratewindow/core'
import type { TestClock } from '../clock.js'

/**
 * The store under test. Its time must be `clock`: pass `clock.read` to its `clock` option, as `MemoryStore` and
 * `RedisStore` take it, so that the suite can move time without waiting.
 */
export interface StoreUnderTest {
  /** Shown in the names of the tests, e.g. `'PostgresStore'`. */
  name: string
  /** A store whose time is `clock`; called for each test (return the same store or a new one). */
  createStore(clock: TestClock): Store | Promise<Store>
  /** Runs per property (fast-check); a store with round trips may want fewer. @default 200 */
  numRuns?: number
  /**
   * Whether the store must reserve slots (`reservations: true`, for `delay` and `wait()`): then one that does
   * not fails the reservation tests. Otherwise they run only for a store that says it reserves. @default false
   */
  reserves?: boolean
  /**
   * Whether the store must keep overrides and manual blocks (`overrides: true`): then one that does not fails
   * their tests. Otherwise they run only for a store that says it keeps them. @default false
   */
  overrides?: boolean
  /**
   * Whether the store must decide quota rules (`quotas: true`): then one that does not fails their tests. Otherwise
   * they run only for a store that says it decides them. @default false
   */
  quotas?: boolean
  /**
   * Whether the store must decide with plans (`plans: true`): then one that does not fails their tests. Otherwise they
   * run only for a store that says it decides with them. @default false
   */
  plans?: boolean
  /**
   * A store of another process on the state `createStore`'s stores share (a store of its own, on a client of its
   * own, to the same Redis), on `clock`: the overrides section then checks that processes see an override, a block
   * and its end set by a third. Leave it out for a store of one process (MemoryStore): that test then says so and
   * checks nothing.
   */
  createProcess?(clock: TestClock): Store | Promise<Store>
  /**
   * When another process sees an override change, for a store that does not read the record as it decides: the
   * bound it guarantees (`bound`, shown in the test's name) and how the test brings a process to it (`reach`,
   * called after the process decided the key). SyncedStore:
   * `{ bound: 'at its next sync of the key', reach: (store) => store.sync() }`.
   * @default at its next decision (the record is read by the decision itself)
   */
  seenWithin?: { bound: string; reach(store: Store): Promise<unknown> }
  /**
   * Whether calls in flight at once are decided in the order they were made even when they were made in different
   * turns of the event loop. A store that sends each turn's calls in a request of their own, with requests in flight
   * at once (the DurableObjectStore), promises the order within a turn only: with `false`, the property of
   * concurrent decisions sends each burst in one turn. @default true
   */
  ordersTurns?: boolean
  /** Each test's timeout, ms (jest's default of 5 s is short for the properties). @default 120_000 */
  timeout?: number
}

/** The test functions of the runner, as vitest and jest give them: `import { describe, it, expect } from 'vitest'`. */
export interface TestFunctions {
  describe: (name: string, body: () => void) => unknown
  it: (name: string, body: () => Promise<unknown>, timeout?: number) => unknown
  expect: Expect
}

/** The part of `expect` the suite uses (vitest's and jest's both fit). */
export type Expect = (actual: unknown) => {
  toBe(expected: unknown): unknown
  toEqual(expected: unknown): unknown
  toMatchObject(expected: Record<string, unknown>): unknown
  toBeLessThanOrEqual(expected: number): unknown
  toBeUndefined(): unknown
}
