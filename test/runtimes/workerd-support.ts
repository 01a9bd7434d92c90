/**
 * Bundles a Worker as wrangler does (esbuild, the `workerd`/`worker`/`browser` conditions) from a project of built
 * packages (project.ts), for workerd through miniflare with no compatibility flag (no `nodejs_compat`): what runs
 * is what a Workers user deploys.
 */
import { copyFileSync, mkdirSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { build as bundle } from 'esbuild'
import { root } from './project.js'

/**
 * The compatibility date of every Worker the tests run (no compatibility flags): a date sets the runtime's
 * defaults, such as `navigator.userAgent` and JavaScript RPC to Durable Objects; it turns on no Node API.
 */
export const COMPATIBILITY_DATE = '2025-09-01'

/**
 * A compatibility date before 2025-05-05, when Workers turned on `WeakRef` and `FinalizationRegistry` (the
 * `enable_weak_ref` flag): Workers deployed with such a date still run without them.
 */
export const DATE_WITHOUT_WEAKREF = '2025-04-01'

/**
 * Bundles `entry` (a Worker module, copied into the project first so that its imports resolve there and not in
 * the workspace, with the `modules` it imports by relative path, named from the entry's directory, e.g.
 * `../support/hono-app.ts`; each copy keeps its path from the repository root) against the project's
 * `node_modules`, as wrangler bundles a Worker.
 */
export async function bundleWorker(entry: string, project: string, modules: string[] = []): Promise<string> {
  const copyIntoProject = (file: string) => {
    const copy = join(project, relative(root, file))
    mkdirSync(dirname(copy), { recursive: true })
    copyFileSync(file, copy)
    return copy
  }
  const copy = copyIntoProject(entry)
  for (const module of modules) copyIntoProject(join(dirname(entry), module))
  const result = await bundle({
    entryPoints: [copy],
    absWorkingDir: project,
    nodePaths: [join(project, 'node_modules')],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['browser', 'module', 'main'],
    external: ['cloudflare:*'],
    write: false,
    logLevel: 'silent',
  })
  return result.outputFiles[0]!.text
}
