/**
 * Next.js at the exact versions this repository checks, one install per major shared by the two checks that need
 * one: test/runtimes/next.test.ts builds and serves its apps in it, and `pnpm check:packages` links its next-15 and
 * next-16 projects' node_modules from it before npm installs the tarballs beside them. An install is mostly the
 * unpacking of Next's SWC binaries (a minute of CPU each): done once, not once per check.
 *
 * Each install lives in .tmp/next-apps/next-<major>-<hash of its versions> (gitignored), filled by npm aside and
 * moved into place, so that an interrupted install leaves nothing half-filled. Two processes asking at once (the
 * checks overlap in `pnpm test:all`) install once: the second waits on the first's lock.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/**
 * The Next.js majors checked, each at an exact version with the React and ioredis its test apps use: the newest
 * 15.x and 16.x (and React 19.x) when last updated. `pnpm check:packages` installs these versions too.
 */
export const NEXT_INSTALLS = {
  15: { next: '15.5.29', react: '19.3.1', 'react-dom': '19.3.1', ioredis: '5.11.1' },
  16: { next: '16.5.0', react: '19.3.1', 'react-dom': '19.3.1', ioredis: '5.11.1' },
} as const
export type NextMajor = keyof typeof NEXT_INSTALLS

/** How long a process waits for another's install of the same versions before giving up. */
const WAIT_MS = 15 * 60_000

/** The install's directory; its node_modules holds Next, React and ioredis once `installNext` has resolved. */
export function nextInstallDir(major: NextMajor): string {
  const versions = JSON.stringify(NEXT_INSTALLS[major])
  const hash = createHash('sha256').update(versions).digest('hex').slice(0, 16)
  // NOTE: not under node_modules/: Next 15's webpack does not compile app files whose path has node_modules in it.
  return join(root, '.tmp', 'next-apps', `next-${major}-${hash}`)
}

/** Installs Next, React and ioredis for `major` unless already there (or being installed: then waits); the dir. */
export async function installNext(major: NextMajor): Promise<string> {
  const dir = nextInstallDir(major)
  const done = () => existsSync(join(dir, 'node_modules', 'next', 'package.json'))
  const lock = `${dir}.lock`
  const deadline = Date.now() + WAIT_MS
  mkdirSync(dirname(dir), { recursive: true })
  while (!done()) {
    if (!takeLock(lock)) {
      if (Date.now() > deadline)
        throw new Error(`Next ${major} still being installed by another process after 15 min (${lock})`)
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      continue
    }
    try {
      if (!done()) await install(major, dir)
    } finally {
      rmSync(lock, { force: true })
    }
  }
  return dir
}

async function install(major: NextMajor, dir: string): Promise<void> {
  const partial = `${dir}.partial-${process.pid}`
  rmSync(partial, { recursive: true, force: true })
  mkdirSync(partial, { recursive: true })
  writeFileSync(
    join(partial, 'package.json'),
    `${JSON.stringify({ private: true, dependencies: NEXT_INSTALLS[major] }, null, 2)}\n`,
  )
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: partial,
    maxBuffer: 16 * 1024 * 1024,
  })
  rmSync(dir, { recursive: true, force: true })
  renameSync(partial, dir)
}

/**
 * Takes the lock file (holding this process's pid) unless a live process holds it; a lock left by a process that
 * is gone is removed and taken.
 */
function takeLock(lock: string): boolean {
  try {
    closeSync(openSync(lock, 'wx'))
    writeFileSync(lock, String(process.pid))
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  if (holderAlive(lock)) return false
  rmSync(lock, { force: true })
  return false // taken on the next turn, unless another process was quicker
}

function holderAlive(lock: string): boolean {
  let pid: number
  try {
    pid = Number(readFileSync(lock, 'utf8'))
    // Created but its pid not written yet: alive for a few seconds.
    if (!pid) return Date.now() - statSync(lock).mtimeMs < 10_000
  } catch {
    return true // removed meanwhile: look again on the next turn
  }
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
