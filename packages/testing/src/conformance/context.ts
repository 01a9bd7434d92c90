/** What every section of the conformance suite shares: the runner's functions, the store under test, `setup`. */
import { RateLimiter, type RateLimiterOptions, type Rule, type Store } from '@ratewindow/core'
import { TestClock } from '../clock.js'
import type { Expect, StoreUnderTest, TestFunctions } from './types.js'

export const SECOND = 1_000
export const MINUTE = 60_000
let uniquePrefix = 0
/** Distinct per test file: several files may run in one process, one after the other, on the same servers. */
const run = Math.random().toString(36).slice(2, 8)

/** A key prefix no other test of this process uses. */
export const nextPrefix = (): string => `t${run}x${uniquePrefix++}`

/** A clock at `start`, the store under test on it, and a limiter of `rules` on that store. */
export interface Setup {
  clock: TestClock
  store: Store
  limiter: RateLimiter
}

/** The context each section registers its tests with. */
export interface SuiteContext {
  subject: StoreUnderTest
  describe: TestFunctions['describe']
  /** The runner's `it`, with the subject's timeout. */
  it: (name: string, body: () => Promise<unknown>) => unknown
  /** `it.each` of one label and one value per case, in the form both runners share. */
  each: <T>(
    cases: readonly (readonly [string, T])[],
  ) => (title: string, body: (label: string, value: T) => Promise<unknown>) => void
  expect: Expect
  /** Runs per property: `PROPERTY_RUNS` from the environment, else the subject's `numRuns`, else 200. */
  numRuns: number
  setup(rules: Rule | Rule[], start?: number, more?: Partial<RateLimiterOptions>): Promise<Setup>
}

export function suiteContext(test: TestFunctions, subject: StoreUnderTest): SuiteContext {
  const { describe, expect } = test
  const timeout = subject.timeout ?? 120_000
  const it = (name: string, body: () => Promise<unknown>) => test.it(name, body, timeout)
  const each =
    <T>(cases: readonly (readonly [string, T])[]) =>
    (title: string, body: (label: string, value: T) => Promise<unknown>) => {
      for (const [label, value] of cases) it(title.replace('%s', label), () => body(label, value))
    }
  const environment = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env
  const numRuns = Number(environment?.PROPERTY_RUNS ?? subject.numRuns ?? 200)

  async function setup(
    rules: Rule | Rule[],
    start = 1_700_000_040_000,
    more: Partial<RateLimiterOptions> = {},
  ): Promise<Setup> {
    const clock = new TestClock(start)
    const store = await subject.createStore(clock)
    // Decisions are compared here, not latency: a generous timeout keeps the failure policy out of it on a
    // loaded machine.
    const limiter = new RateLimiter({
      rules,
      store,
      prefix: nextPrefix(),
      timeout: '30s',
      ...more,
    })
    return { clock, store, limiter }
  }

  return { subject, describe, it, each, expect, numRuns, setup }
}
