/**
 * The installs: every package packed by pnpm as it would be published, TypeScript installed once beside the
 * projects, and each project's tarballs and registry packages installed by npm as users install them.
 */
import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { type Package, packages, root } from './packages.js'
import type { Project, Version } from './projects.js'
import { step } from './report.js'
import type { Slots } from './slots.js'

const run = promisify(execFile)

/** Each package's tarball, by path. */
export type Tarballs = Record<Package, string>

/** One pnpm packs them all (the same tarballs, byte for byte, as a `pnpm pack` in each package). */
export async function pack(work: string): Promise<Tarballs> {
  const tarballDir = join(work, 'tarballs')
  mkdirSync(tarballDir)
  await step('pack', 'pnpm pack every package', () =>
    run('pnpm', ['-r', '--filter', './packages/*', 'pack', '--pack-destination', tarballDir], { cwd: root }),
  )
  return Object.fromEntries(
    packages.map((name) => {
      const file = readdirSync(tarballDir).find((entry) => entry.startsWith(`ratewindow-${name}-`))
      if (!file) throw new Error(`pnpm pack produced no tarball for @ratewindow/${name}`)
      return [name, join(tarballDir, file)]
    }),
  ) as Tarballs
}

/** The TypeScript compilers: installed once (`installed` settles when done), and each version's `tsc`. */
export interface TypeScripts {
  installed: Promise<unknown>
  tsc: Record<Version, string>
}

/**
 * Installs TypeScript 5.9 and 7 beside the projects, in `<work>/tools`; `typescript7` is the native port (npm
 * `typescript@7`).
 */
export function installTypeScripts(work: string, installs: Slots): TypeScripts {
  const tools = join(work, 'tools')
  mkdirSync(tools)
  writeFileSync(join(tools, 'package.json'), '{ "private": true }\n')
  const installed = installs(() =>
    step('npm install', 'install TypeScript 5.9 and 7', () =>
      npmInstall(tools, ['typescript@5.9', 'typescript7@npm:typescript@7']),
    ),
  )
  const tsc: Record<Version, string> = {
    '5.9': join(tools, 'node_modules', 'typescript', 'bin', 'tsc'),
    '7': join(tools, 'node_modules', 'typescript7', 'bin', 'tsc'),
  }
  return { installed, tsc }
}

/** Installs a project's tarballs and registry packages into `dir`, in an install slot. */
export function installProject(
  project: Project,
  dir: string,
  tarballs: Tarballs,
  installs: Slots,
): Promise<boolean> {
  const asked = [...project.tarballs.map((t) => `@ratewindow/${t}.tgz`), ...project.dependencies]
  return installs(() =>
    step('npm install', `install ${project.name}: ${asked.join(' ')}`, async () => {
      let dependencies = project.dependencies
      if (project.preinstalled)
        dependencies = await linkNodeModules(await project.preinstalled(), dir, dependencies)
      await npmInstall(dir, [...project.tarballs.map((name) => tarballs[name]), ...dependencies])
    }),
  )
}

/**
 * Hard-links the files of the install in `from` into `dir` (copies where links cannot be made) and records in
 * `dir`'s package.json those of `dependencies` it holds at the same versions, as a project that installed them
 * before ours would: npm then keeps them (asked for again by name, it would unpack them again). npm's record of
 * the install (node_modules/.package-lock.json), which it rewrites, is copied, not linked. Returns the
 * dependencies still to install.
 */
async function linkNodeModules(from: string, dir: string, dependencies: string[]): Promise<string[]> {
  const source = join(from, 'node_modules')
  const target = join(dir, 'node_modules')
  await run('cp', ['-al', source, target]).catch(async () => {
    rmSync(target, { recursive: true, force: true })
    await run('cp', ['-a', source, target])
  })
  rmSync(join(target, '.package-lock.json'))
  copyFileSync(join(source, '.package-lock.json'), join(target, '.package-lock.json'))
  const held: Record<string, string> = JSON.parse(
    readFileSync(join(from, 'package.json'), 'utf8'),
  ).dependencies
  const split = (spec: string) => [
    spec.slice(0, spec.lastIndexOf('@')),
    spec.slice(spec.lastIndexOf('@') + 1),
  ]
  const kept = dependencies.map(split).filter(([name, version]) => name && held[name!] === version)
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ ...manifest, dependencies: Object.fromEntries(kept) }, null, 2)}\n`,
  )
  return dependencies.filter((spec) => !kept.some(([name]) => split(spec)[0] === name))
}

/** The longest installs first (more packages asked for, roughly more to install). */
export function byInstallSize(projects: Project[]): Project[] {
  const specs = (project: Project) => project.tarballs.length + project.dependencies.length
  return [...projects].sort((a, b) => specs(b) - specs(a))
}

/** npm install, from npm's cache where it can, with no lockfile, no audit and nothing printed but errors. */
async function npmInstall(dir: string, specs: string[]): Promise<void> {
  await run(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
      '--no-package-lock',
      ...specs,
    ],
    { cwd: dir, maxBuffer: 16 * 1024 * 1024 },
  )
}
