/**
 * A framework's app built as its users build it, from our packed tarballs, for the runtime tests of the
 * SvelteKit and Nitro adapters: the framework installed once per exact versions under .tmp/<kind>-apps/ (gitignored;
 * the key is the versions), our tarballs unpacked into the app's own node_modules, and the build (and the packing)
 * skipped when its inputs (what the tarballs hold, the fixture's files) are those of its last build.
 */
import { createHash } from 'node:crypto'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { until } from '../support/connections.js'
import { redisEnvironment } from '../support/redis.js'
import { freePort, root, run, startServer } from './project.js'

const sha = (...parts: (string | Buffer)[]) => {
  const hash = createHash('sha256')
  for (const part of parts) hash.update(part)
  return hash.digest('hex').slice(0, 16)
}

/** `dependencies` (exact versions) installed once into .tmp/<kind>-apps/<hash>; returns the directory. */
export async function installed(kind: string, dependencies: Record<string, string>): Promise<string> {
  const dir = join(root, '.tmp', `${kind}-apps`, sha(JSON.stringify(dependencies)))
  if (existsSync(join(dir, 'node_modules', '.installed'))) return dir
  // Installed aside, then moved into place: an interrupted install leaves no half-filled cache.
  const partial = `${dir}.partial-${process.pid}`
  rmSync(partial, { recursive: true, force: true })
  mkdirSync(partial, { recursive: true })
  writeFileSync(
    join(partial, 'package.json'),
    `${JSON.stringify({ private: true, dependencies }, null, 2)}\n`,
  )
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: partial,
    maxBuffer: 16 * 1024 * 1024,
  })
  writeFileSync(join(partial, 'node_modules', '.installed'), '')
  rmSync(dir, { recursive: true, force: true })
  renameSync(partial, dir)
  return dir
}

/** Packs `names` (`core`, `sveltekit`, …) as they are published, into `into`; returns each tarball's path. */
async function packed(names: readonly string[], into: string): Promise<Record<string, string>> {
  const filters = names.flatMap((name) => ['--filter', `@ratewindow/${name}`])
  await run('pnpm', [...filters, 'pack', '--pack-destination', into], { cwd: root })
  const files = readdirSync(into)
  return Object.fromEntries(
    names.map((name) => [name, join(into, files.find((file) => file.startsWith(`ratewindow-${name}-`))!)]),
  )
}

/** What `pnpm pack` puts in a package's tarball (its manifest, README, dist/ and src/), as hash inputs. */
function packageInputs(name: string): (string | Buffer)[] {
  const dir = join(root, 'packages', name)
  const files = [
    'package.json',
    'README.md',
    ...['dist', 'src'].flatMap((sub) => filesOf(join(dir, sub), `${sub}/`)),
  ]
  return files.flatMap((file) => [file, readFileSync(join(dir, file))])
}

/** Every file under `dir`, as paths relative to it, in a stable order. */
function filesOf(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((item) =>
      item.isDirectory()
        ? filesOf(join(dir, item.name), `${prefix}${item.name}/`)
        : [`${prefix}${item.name}`],
    )
}

export interface AppBuild {
  /** The framework's install (built by `installed`). */
  install: string
  /** The app's directory name under the install's apps/. */
  name: string
  /** The fixture copied into the app. */
  fixture: string
  /** Our packages, packed (only when the app is built) and unpacked into the app. */
  packages: readonly string[]
  /** A scratch directory for packing and unpacking. */
  work: string
  /** Builds the copied app in `dir`. */
  build(dir: string): Promise<unknown>
}

/**
 * The app of `fixture` in its install's apps/ directory, built unless its inputs are those of its last build. The
 * tarballs are unpacked into the app's own node_modules (the framework comes from the install's).
 */
export async function builtApp({ install, name, fixture, packages, work, build }: AppBuild): Promise<string> {
  const app = join(install, 'apps', name)
  const inputs = sha(
    ...packages.flatMap(packageInputs),
    ...filesOf(fixture).flatMap((file) => [file, readFileSync(join(fixture, file))]),
  )
  const stamp = join(app, '.inputs')
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === inputs) return app
  rmSync(app, { recursive: true, force: true })
  cpSync(fixture, app, { recursive: true })
  writeFileSync(join(app, 'package.json'), '{ "private": true, "type": "module" }\n')
  const tarballs = await packed(packages, work)
  for (const [pkg, tarball] of Object.entries(tarballs)) {
    const unpacked = mkdtempSync(join(work, `${pkg}-`))
    await run('tar', ['-xzf', tarball, '-C', unpacked])
    mkdirSync(join(app, 'node_modules', '@ratewindow'), { recursive: true })
    renameSync(join(unpacked, 'package'), join(app, 'node_modules', '@ratewindow', pkg))
  }
  await build(app)
  writeFileSync(stamp, inputs)
  return app
}

/** A built app's server, started by `serveBuilt`. */
export interface Served {
  url: string
  output: () => string
  stop(): Promise<void>
}

/**
 * `node <args>` in the built `app` on a free port, with `env` (and what `envOf` adds for the port), once its
 * `GET /api/free` answers (bounded: 30 s); `what` names the server in errors.
 */
export async function serveBuilt(
  app: string,
  args: string[],
  env: Record<string, string>,
  envOf: (port: number) => Record<string, string>,
  what: string,
): Promise<Served> {
  const port = await freePort()
  const server = startServer(process.execPath, args, {
    cwd: app,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', ...envOf(port) },
  })
  const url = `http://127.0.0.1:${port}`
  await until(
    async () => {
      if (server.child.exitCode !== null)
        throw new Error(`${what} exited (${server.child.exitCode}):\n${server.output()}`)
      return fetch(`${url}/api/free`).then(
        (response) => response.ok,
        () => false,
      )
    },
    () => `${what} answered on ${url} (output so far: ${server.output()})`,
    { within: 30_000, every: 50 },
  )
  return { url, output: server.output, stop: server.stop }
}

export type Store = 'memory' | 'redis'

/**
 * The app's server on each store, started at once for both (the app reads STORE, REDIS_URL, PREFIX and DEAD_PORT, a
 * port where no Redis answers); each describe awaits its own.
 */
export async function servedOnEachStore(
  serve: (env: Record<string, string>) => Promise<Served>,
  prefixOf: (store: Store) => string,
): Promise<Map<Store, Promise<Served>>> {
  const deadPort = String(await freePort())
  const starting = new Map<Store, Promise<Served>>()
  for (const store of ['memory', 'redis'] as const) {
    const started = serve({
      STORE: store,
      REDIS_URL: `redis://127.0.0.1:${redisEnvironment().standalonePort}`,
      PREFIX: prefixOf(store),
      DEAD_PORT: deadPort,
    })
    started.catch(() => {}) // awaited by its describe
    starting.set(store, started)
  }
  return starting
}

/** A GET from behind one proxy: X-Forwarded-For as the proxy wrote it (`claimed`, then `client`). */
export const fromBehindProxy = (url: string, client: string, claimed?: string) =>
  fetch(url, { headers: { 'x-forwarded-for': claimed === undefined ? client : `${claimed}, ${client}` } })
