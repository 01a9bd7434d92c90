/**
 * A fresh project for the runtime tests: core and hono (or the packages asked for) built as `pnpm build` builds
 * them (ESM), with `hono`,
 * `@hono/node-server` and the Redis clients linked from the workspace, and the test's own app modules built to
 * plain JavaScript beside them, so that Node, Bun and Deno run the same files.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { build } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

export const run = promisify(execFile)
export const root = resolve(import.meta.dirname, '../..')

/** The packages linked from the workspace into the project (the app modules import nothing else). */
const LINKED = ['hono', '@hono/node-server', 'ioredis', 'redis']
const EXTERNAL = [/^@ratewindow\//, /^hono(\/|$)/, /^@hono\//, 'ioredis', 'redis']

/**
 * The entries of a package as its `exports` map names them: `dist/<name>.js` built from the source its
 * `@ratewindow/source` condition points at (`@ratewindow/core` has the root and its kits).
 */
function entriesOf(name: string): Record<string, string> {
  const manifest = JSON.parse(readFileSync(join(root, 'packages', name, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { '@ratewindow/source'?: string; import?: { default?: string } }>
  }
  const entries: Record<string, string> = {}
  for (const target of Object.values(manifest.exports)) {
    if (typeof target === 'string' || target['@ratewindow/source'] === undefined) continue
    const built = target.import?.default ?? ''
    entries[built.replace(/^\.\/dist\//, '').replace(/\.js$/, '')] = join(
      root,
      'packages',
      name,
      target['@ratewindow/source'],
    )
  }
  return entries
}

/**
 * Builds the project in a temporary directory: `apps` are TypeScript modules of test/runtimes, built to
 * `<name>.mjs`, `copies` files copied as they are, and `packages` the workspace packages built into it. Returns
 * the directory and how to remove it.
 */
export async function runtimeProject(
  apps: string[] = [],
  copies: string[] = [],
  packages: readonly string[] = ['core', 'hono'],
): Promise<{ dir: string; remove(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'ratewindow-runtimes-'))
  for (const name of packages) {
    const target = join(dir, 'node_modules', '@ratewindow', name)
    mkdirSync(target, { recursive: true })
    copyFileSync(join(root, 'packages', name, 'package.json'), join(target, 'package.json'))
    await build({
      ...packageBuild,
      entry: entriesOf(name),
      // One copy of the code whatever the entry (`@ratewindow/core/adapter` and the root share their chunks).
      splitting: true,
      tsconfig: join(root, 'packages', name, 'tsconfig.json'),
      outDir: join(target, 'dist'),
      format: ['esm'],
      dts: false,
      sourcemap: false,
      external: ['@ratewindow/core', 'hono'],
      silent: true,
    })
  }
  for (const name of LINKED) {
    mkdirSync(join(dir, 'node_modules', name, '..'), { recursive: true })
    symlinkSync(join(root, 'node_modules', name), join(dir, 'node_modules', name), 'dir')
  }
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({
      private: true,
      type: 'module',
      dependencies: Object.fromEntries(['@ratewindow/hono', ...LINKED].map((name) => [name, '*'])),
    })}\n`,
  )
  if (apps.length > 0) {
    await build({
      entry: Object.fromEntries(
        apps.map((app) => [app.replace(/\.ts$/, ''), join(import.meta.dirname, app)]),
      ),
      outDir: dir,
      format: ['esm'],
      outExtension: () => ({ js: '.mjs' }),
      target: 'es2022',
      dts: false,
      sourcemap: false,
      clean: false,
      external: EXTERNAL,
      silent: true,
    })
  }
  for (const file of copies) copyFileSync(join(import.meta.dirname, file), join(dir, file))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/** How each runtime runs a module of the project: the command and its arguments before the file. */
export const RUNTIMES = {
  Node: [process.execPath],
  Bun: [join(root, 'node_modules/.bin/bun')],
  Deno: [
    join(root, 'node_modules/.bin/deno'),
    'run',
    '--node-modules-dir=manual',
    '--allow-net=127.0.0.1',
    '--allow-read',
    '--allow-env',
  ],
} as const

export type Runtime = keyof typeof RUNTIMES

/** A port no one listens on now (127.0.0.1). */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** A server a test started: its output so far, and how to stop it. */
export interface ServerProcess {
  readonly child: ChildProcess
  output(): string
  /** Stops its whole process group (a launcher's children too) and resolves once it exited. */
  stop(): Promise<void>
}

/** Starts `binary` with `args` in a process group of its own, its stdout and stderr kept together. */
export function startServer(
  binary: string,
  args: string[],
  { cwd, env }: { cwd: string; env: NodeJS.ProcessEnv },
): ServerProcess {
  let output = ''
  const child = spawn(binary, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  child.stdout!.on('data', (chunk) => {
    output += chunk
  })
  child.stderr!.on('data', (chunk) => {
    output += chunk
  })
  return {
    child,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      // The whole process group: a launcher (`next start`, a node_modules/.bin shim) runs the server as a child.
      try {
        process.kill(-child.pid!, 'SIGTERM')
      } catch {
        child.kill()
      }
      await exited
    },
  }
}
