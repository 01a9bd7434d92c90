/**
 * Are the Types Wrong on several tarballs in one process (`pnpm check:publish` starts one such process per core):
 * each tarball checked and judged as `attw <tarball> --profile node16` does, by the CLI's own packages (its
 * `@arethetypeswrong/core`, its exit rule and its report), with TypeScript loaded and its lib files parsed once for
 * all the tarballs, where a CLI run per tarball did both each time (about three quarters of the checks' CPU).
 *
 * `tsx scripts/attw-batch.ts <tarball>...` prints one JSON line per tarball: `{ tarball, ok, output }`, `output`
 * the CLI's report of a tarball that fails (empty when it passes).
 */
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { getExitCode } from '@arethetypeswrong/cli/internal/getExitCode'
import { type RenderOptions, typed, untyped } from '@arethetypeswrong/cli/internal/render'

/** What the CLI's report and exit rule read: the analysis of one package. */
type CheckResult = Parameters<typeof getExitCode>[0]

/** The core the CLI itself runs (its exact dependency, not one of ours: imported from where the CLI finds it). */
const core: {
  createPackageFromTarballData(data: Uint8Array): unknown
  checkPackage(pkg: unknown): Promise<CheckResult>
} = await import(
  createRequire(createRequire(import.meta.url).resolve('@arethetypeswrong/cli/package.json')).resolve(
    '@arethetypeswrong/core',
  )
)
/** `--profile node16`: node10 resolution is not judged. */
const options: RenderOptions = { ignoreResolutions: ['node10'] }

for (const tarball of process.argv.slice(2)) {
  let ok: boolean
  let output = ''
  try {
    const analysis = await core.checkPackage(
      core.createPackageFromTarballData(new Uint8Array(await readFile(tarball))),
    )
    ok = getExitCode(analysis, options) === 0
    if (!ok) output = analysis.types ? await typed(analysis, options) : untyped(analysis)
  } catch (error) {
    ok = false
    output = `error while checking file:\n${error instanceof Error ? (error.stack ?? error.message) : error}`
  }
  console.log(JSON.stringify({ tarball, ok, output }))
}
