import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  resolve: {
    // Tests run against package sources, no build step: see the `@ratewindow/source` export condition.
    conditions: ['@ratewindow/source'],
  },
  ssr: { resolve: { conditions: ['@ratewindow/source'] } },
  test: {
    include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Most test files wait on servers, stores and child processes more than they compute: two files at once even
    // on a 2-core machine, where vitest would otherwise run one.
    maxWorkers: Math.max(2, availableParallelism()),
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
})
