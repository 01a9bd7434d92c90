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
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
})
