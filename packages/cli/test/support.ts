/**
 * The CLI as a user runs it: `node <built bin>`, its exit code, stdout and stderr. The build is made first when
 * the package's (or core's) sources are newer than it.
 */
import { execFile, spawn } from 'node:child_process'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..')
export const BIN = join(root, 'packages/cli/dist/bin.js')
export const CONFIG = join(root, 'packages/cli/test/fixtures/limiters.mjs')

function newest(dir: string): number {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return latest
}

/** Builds core and the CLI where their dist is older than their sources (a fresh checkout, an edit). */
export async function ensureBuilt(): Promise<void> {
  for (const name of ['core', 'cli']) {
    const dist = join(root, 'packages', name, 'dist/index.js')
    if (existsSync(dist) && statSync(dist).mtimeMs >= newest(join(root, 'packages', name, 'src'))) continue
    await promisify(execFile)('pnpm', ['--filter', `@ratewindow/${name}`, 'build'], { cwd: root })
  }
}

export interface Ran {
  code: number | null
  stdout: string
  stderr: string
  /** stdout parsed (for `--json`). */
  // biome-ignore lint/suspicious/noExplicitAny: a test reads the JSON it pins
  json: () => any
}

/**
 * Runs `ratewindow ...args` (the built bin, or `bin`) in a child process; with `timeout`, killed (code null) when
 * it has not exited by then.
 */
export function ratewindow(
  args: readonly string[],
  options: { bin?: string; env?: NodeJS.ProcessEnv; timeout?: number } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [options.bin ?? BIN, ...args], {
      env: { ...process.env, REDIS_URL: '', RATEWINDOW_ADMIN_TOKEN: '', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(options.timeout !== undefined && { timeout: options.timeout }),
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => {
      stdout += chunk
    })
    child.stderr.on('data', (chunk) => {
      stderr += chunk
    })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr, json: () => JSON.parse(stdout) }))
  })
}

/**
 * A fresh project with the CLI installed from the packed tarballs (`pnpm pack` of the built core and cli, unpacked
 * into its node_modules as npm would place them; ioredis, the CLI's one dependency, linked from the workspace's
 * install) and the test config copied in, importing core from there. Returns its bin and config.
 */
export async function packedProject(): Promise<{ bin: string; config: string; close(): void }> {
  const run = promisify(execFile)
  const work = mkdtempSync(join(tmpdir(), 'ratewindow-cli-packed-'))
  const tarballs = join(work, 'tarballs')
  await run(
    'pnpm',
    ['--filter', '@ratewindow/core', '--filter', '@ratewindow/cli', 'pack', '--pack-destination', tarballs],
    { cwd: root },
  )
  const project = join(work, 'project')
  mkdirSync(join(project, 'node_modules', '@ratewindow'), { recursive: true })
  writeFileSync(join(project, 'package.json'), '{ "private": true, "type": "module" }\n')
  for (const name of ['core', 'cli']) {
    const tarball = readdirSync(tarballs).find((file) => file.startsWith(`ratewindow-${name}-`))!
    const unpacked = mkdtempSync(join(work, `${name}-`))
    await run('tar', ['-xzf', join(tarballs, tarball), '-C', unpacked])
    renameSync(join(unpacked, 'package'), join(project, 'node_modules', '@ratewindow', name))
  }
  symlinkSync(
    realpathSync(join(root, 'packages/cli/node_modules/ioredis')),
    join(project, 'node_modules', 'ioredis'),
  )
  const config = join(project, 'ratewindow.config.mjs')
  cpSync(CONFIG, config)
  const manifest = JSON.parse(
    readFileSync(join(project, 'node_modules/@ratewindow/cli/package.json'), 'utf8'),
  )
  return {
    bin: join(project, 'node_modules/@ratewindow/cli', manifest.bin.ratewindow),
    config,
    close: () => rmSync(work, { recursive: true, force: true }),
  }
}
