import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { configDefaults, defineConfig } from 'vitest/config'

/** Every test file of the repository. */
const testFiles = [
  'test',
  ...readdirSync('packages')
    .map((name) => join('packages', name, 'test'))
    .filter((dir) => existsSync(dir)),
].flatMap((dir) =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((file) => join(dir, file))
    .filter((file) => file.endsWith('.test.ts') && !file.includes('node_modules')),
)

/**
 * The test files that need modules of their own: those that listen for process warnings (many warnings are
 * once per process, so a file that ran before in the same worker would have used them up) or mock modules. Every
 * other file shares its worker's modules with the files that ran there before it, so that the frameworks, the
 * clients and our sources are imported once per worker, not once per file (it halved the time vitest spends
 * importing). A file is put here by what it contains, so a new one needs no entry.
 */
const ownModules = testFiles.filter((file) =>
  /process\.(on|once)\('warning'|vi\.(mock|doMock)\(/.test(readFileSync(file, 'utf8')),
)

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
    projects: [
      // Each project takes the config's `include` (vitest.nest11.config.ts narrows it) and leaves out the others'.
      {
        extends: true,
        test: {
          name: 'shared modules',
          exclude: [...configDefaults.exclude, ...ownModules],
          poolOptions: { forks: { isolate: false } },
        },
      },
      {
        extends: true,
        test: {
          name: 'own modules',
          exclude: [...configDefaults.exclude, ...testFiles.filter((file) => !ownModules.includes(file))],
        },
      },
    ],
  },
})
