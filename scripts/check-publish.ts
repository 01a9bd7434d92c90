/**
 * `pnpm check:publish`: each package's tarball, as `pnpm publish` would upload it, linted by publint (`--strict`:
 * warnings fail too) and checked by Are the Types Wrong (`attw --profile node16`: every entry point resolves to
 * types of the right module kind from ESM and from CJS under node16, and under bundler). One `pnpm -r pack` packs
 * every package (the same tarballs as a `pnpm pack` in each); the tools then run on the tarballs, at most one per
 * core at a time, and every package is checked even when one fails: publint once a tarball, attw in one process per
 * core for its share of the tarballs (scripts/attw-batch.ts: TypeScript loaded once a process, not once a tarball).
 * `pnpm check:publish core hono` checks those packages only. Part of `pnpm test:all`.
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
    const paths = names.map((name) => {
      const tarball = tarballs.find((file) => file.startsWith(`ratewindow-${name}-`) && file.endsWith('.tgz'))
      if (!tarball) throw new Error(`pnpm pack produced no tarball for packages/${name}`)
      return { name, path: join(work, tarball) }
    })
    const cores = availableParallelism()
    /** Prints a check's verdict as it ends. */
    const verdict = (result: Result): Result => {
      if (result.ok) console.log(`  ✓ packages/${result.name}: ${result.tool}`)
      else
        console.log(`  ✗ packages/${result.name}: ${result.tool}\n${result.output.replace(/^/gm, '      ')}`)
      return result
    }
    const publint = paths.map(({ name, path }) => async (): Promise<Result[]> => {
      const tool = 'publint --strict'
      try {
        const { stdout, stderr } = await run(bin('publint'), ['run', path, '--strict'], {
          cwd: root,
          maxBuffer: 16 * 1024 * 1024,
        })
        return [verdict({ name, tool, ok: true, output: `${stdout}${stderr}` })]
      } catch (error) {
        return [verdict({ name, tool, ok: false, output: failureOf(error) })]
      }
    })
    // The tarballs dealt out in turn to one attw process per core.
    const shares = Array.from({ length: Math.min(cores, paths.length) }, (_, share) =>
      paths.filter((_, index) => index % cores === share),
    )
    const attw = shares.map((share) => async (): Promise<Result[]> => {
      const tool = 'attw --profile node16'
      let stdout = ''
      let failure: string | undefined
      try {
        ;({ stdout } = await run(
          process.execPath,
          ['--import', 'tsx', join(root, 'scripts', 'attw-batch.ts'), ...share.map(({ path }) => path)],
          { cwd: root, maxBuffer: 16 * 1024 * 1024 },
        ))
      } catch (error) {
        failure = failureOf(error)
      }
      const checked = new Map<string, { ok: boolean; output: string }>()
      for (const line of stdout.split('\n').filter(Boolean)) {
        const { tarball, ok, output } = JSON.parse(line) as { tarball: string; ok: boolean; output: string }
        checked.set(tarball, { ok, output })
      }
      return share.map(({ name, path }) =>
        verdict({
          name,
          tool,
          ...(checked.get(path) ?? { ok: false, output: failure ?? 'attw-batch printed no verdict' }),
        }),
      )
    })
    const results = (await pool(cores, [...attw, ...publint])).flat()
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

interface Result {
  name: string
  tool: string
  ok: boolean
  output: string
}

/** What a failed tool printed, else why it could not run. */
function failureOf(error: unknown): string {
  const e = error as { stdout?: string; stderr?: string; message: string }
  return [e.stdout, e.stderr].filter(Boolean).join('\n').trim() || e.message
}

await main()
