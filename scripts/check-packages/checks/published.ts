/**
 * Checks of the packages themselves, before any install: the npm metadata of each package.json, and the packed
 * builds that must load on Workers without nodejs_compat.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describeUses, unexcusedUses } from '../../web-standard.js'
import type { Tarballs } from '../install.js'
import { packages, root } from '../packages.js'
import { step } from '../report.js'

const run = promisify(execFile)

/** The metadata npm pages link back with; every published package.json must carry it. */
const REQUIRED_FIELDS = ['repository', 'homepage', 'bugs', 'keywords', 'license'] as const

/** Every package.json carries REQUIRED_FIELDS, and its `repository.directory` names its own directory. */
export function checkMetadata(): Promise<boolean> {
  return step(
    'metadata',
    'package.json metadata (repository, homepage, bugs, keywords, license)',
    async () => {
      for (const name of packages) {
        const manifest = JSON.parse(readFileSync(join(root, 'packages', name, 'package.json'), 'utf8'))
        const missing = REQUIRED_FIELDS.filter((field) => manifest[field] === undefined)
        if (missing.length > 0) throw new Error(`packages/${name}/package.json lacks ${missing.join(', ')}`)
        if (manifest.repository?.directory !== `packages/${name}`)
          throw new Error(`packages/${name}/package.json: repository.directory must be "packages/${name}"`)
      }
    },
  )
}

/**
 * Core, the Hono adapter and the Durable Object store load on Workers without nodejs_compat: their packed builds
 * import no Node module and use no unguarded Node global (scripts/web-standard.ts).
 */
export async function scanBuiltins(work: string, tarballs: Tarballs): Promise<void> {
  for (const name of ['core', 'hono', 'cloudflare'] as const) {
    await step(
      'built-in scan',
      `@ratewindow/${name} tarball: no Node built-in import, no unguarded Node global`,
      async () => {
        const unpacked = join(work, `${name}-unpacked`)
        mkdirSync(unpacked)
        await run('tar', ['-xzf', tarballs[name], '-C', unpacked])
        const problems = ['index.js', 'index.cjs'].flatMap((file) =>
          problemsOf(file, readFileSync(join(unpacked, 'package', 'dist', file), 'utf8')),
        )
        if (problems.length > 0) throw new Error(problems.join('\n'))
      },
    )
  }
}

/** A built file's Node uses with no excuse, and the excused imports it no longer makes. */
function problemsOf(file: string, source: string): string[] {
  const { uses, gone } = unexcusedUses(source, file)
  return [
    ...(uses.length > 0 ? [describeUses(`dist/${file}`, uses)] : []),
    ...gone.map((each) => `dist/${file} no longer imports ${each}: delete it from KNOWN_NODE_IMPORTS`),
  ]
}
