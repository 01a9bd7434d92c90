/**
 * `pnpm check:publish`: each package's tarball, as `pnpm publish` would upload it, linted by publint (`--strict`:
 * warnings fail too) and checked by Are the Types Wrong (`attw --profile node16`: every entry point resolves to
 * types of the right module kind from ESM and from CJS under node16, and under bundler). One `pnpm -r pack` packs
 * every package (the same tarballs as a `pnpm pack` in each); the tools then run on the tarballs, at most one per
 * core at a time, and every package is checked even when one fails. `pnpm check:publish core hono` checks those
 * packages only. Part of `pnpm test:all`.
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const bin = (name: string) => join(root, 'node_modules', '.bin', name)

const all = readdirSync(join(root, 'packages')).filter((name) =>
  existsSync(join(root, 'packages', name, 'package.json')),
)
const asked = process.argv.slice(2).filter((arg) => !arg.startsWith('-'))
const unknown = asked.filter((name) => !all.includes(name))
if (unknown.length > 0) {
  console.error(`no package ${unknown.join(', ')} under packages/ (there are ${all.join(', ')})`)
  process.exit(1)
}
const names = asked.length > 0 ? asked : all

/** Runs `tasks` with at most `limit` at once. */
async function pool<T>(limit: number, tasks: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(limit, tasks.length) }, async () => {
      while (next < tasks.length) {
        const index = next++
        results[index] = await tasks[index]!()
      }
    }),
  )
  return results
}

async function main(): Promise<void> {
  const started = performance.now()
  const work = mkdtempSync(join(tmpdir(), 'ratewindow-publish-'))
  try {
    await run(
      'pnpm',
      [
        '-r',
        ...names.flatMap((name) => ['--filter', `./packages/${name}`]),
        'pack',
        '--pack-destination',
        work,
      ],
      { cwd: root },
    )
    const tarballs = readdirSync(work)
    const checks = names.flatMap((name) => {
      const tarball = tarballs.find((file) => file.startsWith(`ratewindow-${name}-`) && file.endsWith('.tgz'))
      if (!tarball) throw new Error(`pnpm pack produced no tarball for packages/${name}`)
      const path = join(work, tarball)
      return [
        { name, tool: 'publint --strict', command: bin('publint'), args: ['run', path, '--strict'] },
        { name, tool: 'attw --profile node16', command: bin('attw'), args: [path, '--profile', 'node16'] },
      ]
    })
    const results = await pool(
      availableParallelism(),
      checks.map((check) => async () => {
        try {
          const { stdout, stderr } = await run(check.command, check.args, {
            cwd: root,
            maxBuffer: 16 * 1024 * 1024,
          })
          console.log(`  ✓ packages/${check.name}: ${check.tool}`)
          return { ...check, ok: true, output: `${stdout}${stderr}` }
        } catch (error) {
          const e = error as { stdout?: string; stderr?: string; message: string }
          const output = [e.stdout, e.stderr].filter(Boolean).join('\n').trim() || e.message
          console.log(`  ✗ packages/${check.name}: ${check.tool}\n${output.replace(/^/gm, '      ')}`)
          return { ...check, ok: false, output }
        }
      }),
    )
    const failed = results.filter((result) => !result.ok)
    console.log(
      `publish checks: ${results.length - failed.length} passed, ${failed.length} failed (${((performance.now() - started) / 1000).toFixed(1)} s)`,
    )
    if (failed.length > 0) {
      console.log(
        `failed:\n${failed.map((result) => `  packages/${result.name}: ${result.tool}`).join('\n')}`,
      )
      process.exitCode = 1
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

await main()
