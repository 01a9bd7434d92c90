import { createRequire } from 'node:module'
import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  resolve: {
    // Tests run against package sources, no build step: see the `@ratewindow/source` export condition.
    conditions: ['@ratewindow/source'],
    // graphql 16 has no `exports` map: Vite would pick its ESM build (the `module` field) for our sources while
    // Node, and so GraphQL Yoga and Apollo Server, load its CommonJS build; two copies of graphql then refuse
    // each other's types and errors. Both get the one Node loads.
    alias: [{ find: /^graphql$/, replacement: createRequire(import.meta.url).resolve('graphql') }],
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
