/** Programs of @ratewindow/testing: the kit typed as users type it, and test files run by vitest and by jest. */

/** The test kit as users type it: the clock, the header assertions, the prefix helper and the conformance suite. */
export const TESTING_PROGRAM = `import { fixedWindow, MemoryStore, RateLimiter } from '@ratewindow/core'
import {
  describeStoreConformance,
  expectAllowed,
  type RateLimitHeaders,
  readRateLimit,
  TestClock,
  type TestFunctions,
  testPrefix,
} from '@ratewindow/testing'

export const clock = new TestClock()
export const limiter = new RateLimiter({
  rules: fixedWindow({ limit: 2, window: '1m' }),
  store: clock.memoryStore(),
  circuitBreaker: clock.circuitBreaker(),
  prefix: testPrefix('api'),
})
clock.advance('1m')
export const read: RateLimitHeaders = readRateLimit({ 'ratelimit-limit': '2', 'ratelimit-remaining': '1' })
export function check(response: { status: number; headers: Record<string, string> }): number | undefined {
  return expectAllowed(response, { limit: 2 }).remaining
}
export function register(test: TestFunctions): void {
  describeStoreConformance(test, { name: 'MemoryStore', createStore: (c) => new MemoryStore({ clock: c.read }) })
}
`

/**
 * A test file as a team writes one, for vitest (ESM) or jest (CommonJS): one app per test on a module-level store,
 * fake timers with the runner's defaults, limiting switched off, the header assertions, and the conformance suite.
 */
export function kitSuite(runner: 'vitest' | 'jest'): string {
  const load = (name: string) => (runner === 'vitest' ? `await import('${name}')` : `require('${name}')`)
  const head =
    runner === 'vitest'
      ? "import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'\nconst timers = vi"
      : 'const timers = jest'
  return `${head}
const expressModule = ${load('express')}
const express = expressModule.default ?? expressModule
const supertest = ${load('supertest')}
const request = supertest.default ?? supertest
const { MemoryStore, rateLimit } = ${load('@ratewindow/express')}
const { describeStoreConformance, expectAllowed, expectLimited, expectNoRateLimit, testPrefix } = ${load('@ratewindow/testing')}

const store = new MemoryStore() // module level: one for the file
function createApp(options = {}) {
  const limiter = rateLimit({ limit: 2, window: '1m', store, ...options })
  const app = express()
  app.use(limiter)
  app.get('/', (_req, res) => { res.send('ok') })
  return { app, limiter }
}
let current
beforeEach(() => {
  store.clear()
  current = createApp()
})
afterEach(() => current.limiter.close())

describe('one app per test', () => {
  for (const name of ['first', 'second', 'third']) {
    it(name + ': its own app and counters', async () => {
      expectAllowed(await request(current.app).get('/'), { remaining: 1 })
      expectAllowed(await request(current.app).get('/'), { remaining: 0 })
      expectLimited(await request(current.app).get('/'))
    })
  }
  it('two apps live at once keep answering', async () => {
    const other = createApp()
    expectAllowed(await request(other.app).get('/'))
    expectAllowed(await request(current.app).get('/'))
  })
})

it('fake timers: requests answer, and the memory store follows the fake clock', async () => {
  timers.useFakeTimers()
  try {
    await request(current.app).get('/')
    await request(current.app).get('/')
    expectLimited(await request(current.app).get('/'))
    timers.advanceTimersByTime(120_000) // two windows: the sliding window counter weighs the previous one
    expectAllowed(await request(current.app).get('/'))
  } finally {
    timers.useRealTimers()
  }
})

it('enabled: false switches limiting off', async () => {
  const off = createApp({ enabled: false })
  for (let i = 0; i < 3; i++) expectNoRateLimit(await request(off.app).get('/'))
})

it('testPrefix names this worker', () => {
  expect(testPrefix('api')).toMatch(/^api:w[0-9]+:/)
})

describeStoreConformance({ describe, it, expect }, {
  name: 'MemoryStore from the tarball',
  createStore: (clock) => new MemoryStore({ clock: clock.read }),
  numRuns: 10,
})
`
}

/** A test suite run by its runner in a project: files written beside it, then `node <command>` must exit 0. */
export interface Suite {
  name: string
  files: Record<string, string>
  command: string[]
}

/** The testing project's suites: two test files per runner, so that each runner spreads them over workers. */
export const KIT_SUITES: Suite[] = [
  {
    name: 'vitest (ESM, two files in parallel workers)',
    files: {
      'vitest.config.mjs': "export default { test: { include: ['*.vitest.mjs'], testTimeout: 120000 } }\n",
      'a.vitest.mjs': kitSuite('vitest'),
      'b.vitest.mjs': kitSuite('vitest'),
    },
    command: ['node_modules/vitest/vitest.mjs', 'run'],
  },
  {
    name: 'jest (CommonJS, two files in parallel workers)',
    files: {
      'jest.config.cjs':
        "module.exports = { testEnvironment: 'node', testMatch: ['**/*.jest.cjs'], moduleFileExtensions: ['js', 'cjs', 'json'] }\n",
      'a.jest.cjs': kitSuite('jest'),
      'b.jest.cjs': kitSuite('jest'),
    },
    command: ['node_modules/jest/bin/jest.js', '--ci', '--maxWorkers=2'],
  },
]
