/**
 * A project's checks other than its typechecks: its runtime programs run with node, its test suites run by their
 * runners, its own checks (projects.ts), and, for a project with no @types/node, that none was installed.
 */
import { execFile } from 'node:child_process'
import { readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Project } from '../projects.js'
import { step } from '../report.js'

const run = promisify(execFile)

/** A check to run once the project is installed; it reports itself. */
export type Check = () => Promise<unknown>

/** Writes the files of a project's runs and suites into `dir`; returns its checks, in the order they are queued. */
export function writeChecks(project: Project, dir: string): Check[] {
  return [
    ...programRuns(project, dir),
    ...testSuites(project, dir),
    ...(project.checks ?? []).map((check): Check => {
      const action = check.begin(dir)
      return () => step(check.kind, check.name, action)
    }),
    ...(project.noNodeTypes ? [noNodeTypes(project, dir)] : []),
  ]
}

/** Each runtime program, run with node in the project: it must print `ok`. */
function programRuns(project: Project, dir: string): Check[] {
  return Object.entries(project.runs).map(([file, source]) => {
    writeFileSync(join(dir, file), source)
    return () =>
      step('program run', `run ${project.name} ${file}`, async () => {
        const { stdout } = await run(process.execPath, [file], { cwd: dir, timeout: 30_000 })
        if (stdout.trim() !== 'ok') throw new Error(`expected "ok", printed ${JSON.stringify(stdout)}`)
      })
  })
}

/** Each test suite, run by its runner in the project: it must exit 0. */
function testSuites(project: Project, dir: string): Check[] {
  return (project.suites ?? []).map((suite) => {
    for (const [file, source] of Object.entries(suite.files)) writeFileSync(join(dir, file), source)
    return () =>
      step('test suite', `test ${project.name} with ${suite.name}`, () =>
        run(process.execPath, suite.command, { cwd: dir, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }),
      )
  })
}

/** The install brought no `@types/*` package at all (so none of ours depends on @types/node). */
function noNodeTypes(project: Project, dir: string): Check {
  return () =>
    step('no @types/node', `${project.name} installs no @types/node`, async () => {
      const types = join(dir, 'node_modules', '@types')
      let entries: string[] = []
      try {
        entries = readdirSync(types)
      } catch {}
      if (entries.length > 0) throw new Error(`node_modules/@types holds ${entries.join(', ')}`)
    })
}
