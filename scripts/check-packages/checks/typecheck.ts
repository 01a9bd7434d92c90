/**
 * The typechecks: a project's programs compiled in its ESM and CJS sub-projects under each moduleResolution, with
 * each TypeScript version, one tsconfig per combination holding every program of the project (they share the
 * options, and most of the work is reading the packages' and frameworks' declarations, which one program reads
 * once: for two programs, a quarter less CPU than a program each); a project's tsconfigs for one version run in one
 * `tsc -b`.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { promisify } from 'node:util'
import type { ModuleSystem } from '../programs/load.js'
import type { Project, Version } from '../projects.js'
import { detailOf, report, step, timed } from '../report.js'

const run = promisify(execFile)

/** moduleResolution modes checked per module system (bundler resolution implies an ESM-style program). */
const MODES = {
  esm: { node16: 'node16', nodenext: 'nodenext', bundler: 'esnext' },
  cjs: { node16: 'node16', nodenext: 'nodenext' },
} as const

/** One typecheck: a tsconfig in a project's `esm` or `cjs` sub-project, its own options and the project's programs. */
export interface Typecheck {
  name: string
  system: ModuleSystem
  config: string
}

/**
 * Writes a project's `esm` and `cjs` sub-projects into `dir`: their package.json, the programs, and a tsconfig per
 * typecheck. Returns the typechecks per TypeScript version.
 */
export function writeTypechecks(project: Project, dir: string): Record<Version, Typecheck[]> {
  const typechecks: Record<Version, Typecheck[]> = { '5.9': [], '7': [] }
  for (const system of ['esm', 'cjs'] as const) {
    const sub = join(dir, system)
    mkdirSync(sub)
    writeFileSync(
      join(sub, 'package.json'),
      system === 'esm' ? '{ "type": "module" }\n' : '{ "type": "commonjs" }\n',
    )
    for (const [file, source] of Object.entries(project.programs)) writeFileSync(join(sub, file), source)
    for (const [resolution, module] of Object.entries(MODES[system]))
      for (const version of project.typescripts) {
        // With skipLibCheck, nodenext adds nothing to node16 here; TypeScript 7 checks both in full.
        if (version === '5.9' && resolution === 'nodenext' && !project.noNodeTypes) continue
        const programs = Object.keys(project.programs).filter(
          (program) => !project.skip?.({ system, resolution, version, program }),
        )
        if (programs.length === 0) continue
        const config = `tsconfig.${resolution}.typescript-${version}.json`
        writeFileSync(join(sub, config), tsconfig(project, { module, resolution, version, programs }))
        typechecks[version].push({
          name: `typecheck ${project.name} ${system} ${resolution} TypeScript ${version}: ${programs.join(', ')}`,
          system,
          config,
        })
      }
  }
  return typechecks
}

/**
 * One check's tsconfig, complete in itself (`tsc -p` it to see one check alone, with KEEP=1): strict, lib checks
 * on with TypeScript 7 and in the projects with no @types/node, off otherwise, as most projects set it.
 */
function tsconfig(
  project: Project,
  check: { module: string; resolution: string; version: Version; programs: string[] },
): string {
  const compilerOptions = {
    target: 'ES2022',
    lib: ['ES2023'],
    module: check.module,
    moduleResolution: check.resolution,
    strict: true,
    noEmit: true,
    skipLibCheck: (check.version === '5.9' && !project.noNodeTypes) || project.skipLibCheck === true,
    esModuleInterop: true,
    types: project.noNodeTypes ? [] : ['node'],
    ...(project.decorators ? { experimentalDecorators: true, emitDecoratorMetadata: true } : {}),
  }
  return `${JSON.stringify({ compilerOptions, files: check.programs }, null, 2)}\n`
}

/**
 * Typechecks a project's configs with one compiler in one `tsc -b --force` (build mode parses the files the
 * configs share once, and starts the compiler once): each config is still its own program with its own options,
 * and the run fails if any has an error, as `tsc -p` of each would. When it fails, each config runs alone with
 * `tsc -p`, so that every failure is reported under its own check's name.
 */
export async function typecheck(
  version: Version,
  tsc: string,
  dir: string,
  checks: Typecheck[],
): Promise<void> {
  if (checks.length === 0) return
  const kind = `tsc ${version}` as const
  const batch = `${kind} -b ${basename(dir)} (${checks.length} configs)`
  const configs = checks.map((check) => `${check.system}/${check.config}`)
  let failure: string | undefined
  try {
    await timed(kind, batch, () =>
      run(process.execPath, [tsc, '-b', '--force', ...threads(version), ...configs], {
        cwd: dir,
        maxBuffer: 16 * 1024 * 1024,
      }),
    )
  } catch (error) {
    failure = detailOf(error) || 'failed'
  }
  if (failure === undefined) {
    for (const check of checks) report(check.name)
    return
  }
  if (await eachAlone(version, tsc, dir, checks))
    report(`${batch}: each config passes alone, the batch failed`, failure)
}

/**
 * TypeScript 7 checks with several threads by default; here, where one check per core runs already, one thread
 * each gives the same diagnostics for less CPU.
 */
function threads(version: Version): string[] {
  return version === '7' ? ['--singleThreaded'] : []
}

/** Each config alone with `tsc -p`, reported under its own name; true when every one passes. */
async function eachAlone(version: Version, tsc: string, dir: string, checks: Typecheck[]): Promise<boolean> {
  let passedAlone = 0
  for (const check of checks)
    if (
      await step(`tsc ${version}`, check.name, () =>
        run(process.execPath, [tsc, '-p', check.config, ...threads(version)], {
          cwd: join(dir, check.system),
          maxBuffer: 16 * 1024 * 1024,
        }),
      )
    )
      passedAlone++
  return passedAlone === checks.length
}
