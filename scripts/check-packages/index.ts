/**
 * The published packages as users get them (`pnpm check:packages`, part of `pnpm test:all`): `pnpm pack` each
 * package, install the tarballs with npm into fresh projects (one per framework version), then typecheck small
 * programs in ESM and CommonJS projects under moduleResolution node16, nodenext and bundler, strict, with
 * TypeScript 7 (the native port, skipLibCheck off, so the packages' own .d.ts files are checked too) and TypeScript
 * 5.9 (skipLibCheck on, as most projects set it, node16 and bundler; every mode with skipLibCheck off for the
 * projects with no @types/node: core alone, core with otel, Workers), and run a tiny ESM and CJS program against
 * each tarball.
 *
 * Every project installs once from npm's cache where it can (`--prefer-offline`); its ESM and CJS sub-projects
 * share that install. Installs and checks run concurrently, at most one install and one check per core at a time,
 * and a project's checks start as soon as its install is done. Each typecheck has its own tsconfig (one set of
 * options, the project's programs); a project's typechecks run in one `tsc -b` per TypeScript version, and each
 * config alone with `tsc -p` when that fails, so that each failure is named.
 *
 * `KEEP=1` keeps the work directory for a look afterwards; `ONLY=<project>,…` checks those projects alone (the
 * packing and built-in scans still run); `--timings` (`pnpm check:packages --timings`) ends with a table of where
 * the time went.
 *
 * Here, the run from start to end; projects.ts says what is installed where, programs/ what runs in it.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkMetadata, scanBuiltins } from './checks/published.js'
import { writeChecks } from './checks/runs.js'
import { typecheck, writeTypechecks } from './checks/typecheck.js'
import {
  byInstallSize,
  installProject,
  installTypeScripts,
  pack,
  type Tarballs,
  type TypeScripts,
} from './install.js'
import { type Project, projects } from './projects.js'
import { summarize, timed } from './report.js'
import { type Slots, slots } from './slots.js'

/** `KEEP=1`: the work directory stays for a look. */
const keep = process.env.KEEP === '1'
/** `ONLY=<project>,…`: those projects alone. */
const only = process.env.ONLY?.split(',')

async function main(): Promise<void> {
  const started = performance.now()
  const work = mkdtempSync(join(tmpdir(), 'ratewindow-packages-'))
  console.log(`Packed tarballs, checked as users install them (in ${work})`)
  await checkMetadata()
  const tarballs = await pack(work)
  const packed = performance.now()
  await scanBuiltins(work, tarballs)

  // Installs and checks overlap: a project's checks start once its own install (and, for its typechecks, the
  // TypeScript install) is done. At most one install and one check per core run at once.
  const cores = availableParallelism()
  const install = slots(cores)
  const shared: Shared = {
    work,
    tarballs,
    typescripts: installTypeScripts(work, install),
    install,
    check: slots(cores),
  }
  const chosen = only === undefined ? projects : projects.filter((project) => only.includes(project.name))
  // The longest installs first, so that the last install to end, and the checks waiting on it, are short ones.
  await Promise.all(byInstallSize(chosen).map((project) => checkProject(project, shared)))
  if (!keep)
    await timed('remove', 'remove the tools and tarballs', () => rm(work, { recursive: true, force: true }))

  summarize(
    { started, packed, done: performance.now() },
    { timings: process.argv.includes('--timings'), kept: keep ? work : undefined },
  )
}

/** What every project's check shares: the work directory, the tarballs, TypeScript, and the slots. */
interface Shared {
  work: string
  tarballs: Tarballs
  typescripts: TypeScripts
  install: Slots
  check: Slots
}

/**
 * One project: written (programs, tsconfigs, run files), installed, checked (typechecks and its other checks side
 * by side), then removed.
 */
async function checkProject(project: Project, shared: Shared): Promise<void> {
  const dir = join(shared.work, project.name)
  mkdirSync(dir)
  writeFileSync(join(dir, 'package.json'), `{ "name": "check-${project.name}", "private": true }\n`)
  const typechecks = writeTypechecks(project, dir)
  const checks = writeChecks(project, dir)
  await installProject(project, dir, shared.tarballs, shared.install)
  await Promise.all([
    ...(['5.9', '7'] as const).map(async (version) => {
      await shared.typescripts.installed
      await shared.check(() => typecheck(version, shared.typescripts.tsc[version], dir, typechecks[version]))
    }),
    ...checks.map((check) => shared.check(check)),
  ])
  // Thousands of files: removed while other projects are still checked, not all at the end.
  if (!keep) await timed('remove', `remove ${project.name}`, () => rm(dir, { recursive: true, force: true }))
}

await main()
