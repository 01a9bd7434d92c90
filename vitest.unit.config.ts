/**
 * The fast inner loop (`pnpm test:unit [path]`): the packages' own unit tests on memory stores, with no Redis
 * server started and no Redis test included. `pnpm test:unit packages/core` runs core's in well under a minute.
 * `pnpm test` (and `pnpm test:all`, which CI runs) still runs everything.
 */
import { defineConfig } from 'vitest/config'
import base from './vitest.config.js'

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['packages/*/test/**/*.test.ts'],
    // These start or reach a redis-server (the global setup's, or one of their own): `pnpm test` runs them.
    exclude: [
      'packages/core/test/hostile-operator.test.ts',
      'packages/express/test/hostile.test.ts',
      'packages/fastify/test/hostile.test.ts',
      'packages/graphql/test/plugins.test.ts',
      'packages/h3/test/h3.test.ts',
      'packages/koa/test/hostile.test.ts',
      'packages/otel/test/metrics.test.ts',
      'packages/testing/test/kit.test.ts',
      'packages/trpc/test/middleware.test.ts',
      'packages/ws/test/limits.test.ts',
      'packages/ws/test/stall.test.ts',
    ],
    globalSetup: [],
  },
})
