/**
 * Builds the packages as `pnpm build` builds them (tsup, ESM) into a fresh project, bundles a Worker from it as
 * wrangler does (esbuild, the `workerd`/`worker`/`browser` conditions), and gives the bundle to workerd through
 * miniflare, with no compatibility flag (no `nodejs_compat`): what runs is what a Workers user deploys.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { build as bundle } from 'esbuild'
import { build } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

const root = resolve(import.meta.dirname, '../..')

/**
 * The compatibility date of every Worker the tests run (no compatibility flags): a date sets the runtime's
 * defaults, such as `navigator.userAgent` and JavaScript RPC to Durable Objects; it turns on no Node API.
 */
export const COMPATIBILITY_DATE = '2025-09-01'

/** A fresh project holding the built `@ratewindow/*` packages (`names`) and links to `hono`. */
export async function builtProject(names: readonly string[]): Promise<{ dir: string; remove(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'ratewindow-workerd-'))
  for (const name of names) {
    const target = join(dir, 'node_modules', '@ratewindow', name)
    mkdirSync(target, { recursive: true })
    copyFileSync(join(root, 'packages', name, 'package.json'), join(target, 'package.json'))
    await build({
      ...packageBuild,
      entry: [join(root, 'packages', name, 'src/index.ts')],
      tsconfig: join(root, 'packages', name, 'tsconfig.json'),
      outDir: join(target, 'dist'),
      format: ['esm'],
      dts: false,
      sourcemap: false,
      external: ['@ratewindow/core', 'hono', 'cloudflare:workers'],
      silent: true,
    })
  }
  symlinkSync(join(root, 'node_modules', 'hono'), join(dir, 'node_modules', 'hono'), 'dir')
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/**
 * Bundles `entry` (a Worker module, copied into the project first so that its imports resolve there and not in
 * the workspace) against the project's `node_modules`, as wrangler bundles a Worker.
 */
export async function bundleWorker(entry: string, project: string): Promise<string> {
  const copy = join(project, basename(entry))
  copyFileSync(entry, copy)
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
