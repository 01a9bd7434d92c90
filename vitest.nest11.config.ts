/**
 * The Nest HTTP suites again on Nest 11, the previous major (`pnpm test:nest11`): every `@nestjs/*` import of the
 * tests and of @ratewindow/nestjs's sources resolves to test/nest11's Nest 11 install, whose own modules then load
 * one another (a consistent Nest 11, the app's `HttpException` the one the guard throws).
 */
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'
import base from './vitest.config.js'

const nest11 = fileURLToPath(new URL('./test/nest11/node_modules/@nestjs/', import.meta.url))

export default defineConfig({
  ...base,
  resolve: {
    ...base.resolve,
    alias: [
      {
        find: /^@nestjs\/(common|core|platform-express|platform-fastify|testing)$/,
        replacement: `${nest11}$1`,
      },
    ],
  },
  test: {
    ...base.test,
    include: [
      'test/http/{behaviour,callbacks,client-headers,composition,concurrency-disconnect,delay,frameworks,policies,shadow-combinations,nestjs,slow-down,slow-down-bounds}.test.ts',
    ],
    testNamePattern: /Nest/,
    env: { NEST_MAJOR: '11' },
  },
})
