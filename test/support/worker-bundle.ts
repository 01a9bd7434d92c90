/**
 * The child processes a test starts (its workers, test/support/*-worker.ts) as one JavaScript file each, that
 * plain node runs: the worker with the packages' sources it imports (the `@ratewindow/source` condition, as the
 * tests import them), bundled by esbuild, its other dependencies (ioredis, redis) left as imports that node
 * resolves as before. Under tsx, each process transformed and loaded the packages' sources module by module, about
 * a second of CPU a process; the bundle is made once per test file and each process loads it in a fraction of that.
 */
import { renameSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { build } from 'esbuild'

const root = join(import.meta.dirname, '..', '..')
/** Under the root's node_modules, so that the bundles' imports resolve as the workers' own did. */
const outDir = join(root, 'node_modules', '.cache', 'test-workers')

const bundles = new Map<string, Promise<string>>()

/** The bundle of the worker `file` (a .ts file): its path, for `fork` or `node`. Made once per test file. */
export function workerBundle(file: string): Promise<string> {
  let bundle = bundles.get(file)
  if (bundle === undefined) {
    bundle = makeBundle(file)
    bundles.set(file, bundle)
  }
  return bundle
}

async function makeBundle(file: string): Promise<string> {
  await mkdir(outDir, { recursive: true })
  const target = join(outDir, basename(file).replace(/\.ts$/, '.mjs'))
  // Written aside, then renamed: test files bundling the same worker at once never see half a file.
  const partial = `${target}.${process.pid}.partial`
  await build({
    entryPoints: [file],
    outfile: partial,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    conditions: ['@ratewindow/source'],
    sourcemap: 'inline',
    logLevel: 'silent',
    plugins: [
      {
        name: 'dependencies-stay-imports',
        setup(build) {
          build.onResolve({ filter: /^[^./]/ }, (args) =>
            args.path.startsWith('@ratewindow/') ? undefined : { path: args.path, external: true },
          )
        },
      },
    ],
  })
  renameSync(partial, target)
  return target
}

/** node's options for a bundled worker: stack traces through the bundle's source map name the .ts files. */
export const WORKER_EXEC_ARGV = ['--enable-source-maps']
