/**
 * The published packages as users get them: `pnpm pack` each package, install the tarballs with npm into fresh
 * projects (one per framework version), then typecheck small programs in ESM and CommonJS projects under
 * moduleResolution node16, nodenext and bundler, strict, with TypeScript 7 (the native port, skipLibCheck off, so
 * the packages' own .d.ts files are checked too) and TypeScript 5.9 (skipLibCheck on, as most projects set it,
 * node16 and bundler; every mode with skipLibCheck off for the projects with no @types/node: core alone, core with
 * otel, Workers), and run a tiny ESM and CJS
 * program against each tarball. Part of `pnpm test:all` (`pnpm check:packages`).
 *
 * Every project installs once from npm's cache where it can (`--prefer-offline`); its ESM and CJS sub-projects
 * share that install. Installs and checks run concurrently, at most one install and one check per core at a time,
 * and a project's checks start as soon as its install is done. Each typecheck has its own tsconfig (one program,
 * one set of options); a project's typechecks run in one `tsc -b` per TypeScript version, and each config alone
 * with `tsc -p` when that fails, so that each failure is named. `KEEP=1` keeps the work directory for a look
 * afterwards; `ONLY=<project>,…` checks those projects alone (the packing and built-in scans still run);
 * `--timings` (`pnpm check:packages --timings`) ends with a table of where the time went.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { availableParallelism, tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { promisify } from 'node:util'
import { build as bundle } from 'esbuild'
import { Miniflare } from 'miniflare'
import { RedisClusterProcesses, RedisServer } from '../test/support/redis-server.js'
import { type Package, packages, root } from './check-packages/packages.js'
import { WORKERD_APP } from './check-packages/programs/cloudflare.js'
import { REDIS_OVERRIDES_RUN } from './check-packages/programs/core.js'
import { type Project, projects, type Version } from './check-packages/projects.js'
import { describeUses, unexcusedUses } from './web-standard.js'

const run = promisify(execFile)
const work = mkdtempSync(join(tmpdir(), 'ratewindow-packages-'))
/** `KEEP=1`: the work directory stays for a look. */
const keep = process.env.KEEP === '1'

/** The metadata npm pages link back with; every published package.json must carry it. */
const REQUIRED_FIELDS = ['repository', 'homepage', 'bugs', 'keywords', 'license'] as const

/**
 * Bundles WORKERD_APP in the project and asks it in workerd: 200, 200, 429, with no Node globals; then, from the
 * admin routes, an override raises the client's limit to 4 (200, 200, 429 again) and a block refuses it at once.
 */
async function runInWorkerd(dir: string): Promise<void> {
  writeFileSync(join(dir, 'workerd-app.mjs'), WORKERD_APP)
  const { outputFiles } = await bundle({
    entryPoints: [join(dir, 'workerd-app.mjs')],
    absWorkingDir: dir,
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['browser', 'module', 'main'],
    external: ['cloudflare:*'],
    write: false,
    logLevel: 'silent',
  })
  const mf = new Miniflare({
    modules: [{ type: 'ESModule', path: 'worker.js', contents: outputFiles[0]!.text }],
    compatibilityDate: '2025-09-01',
    compatibilityFlags: [],
    durableObjects: { RATE_LIMITER: { className: 'RateLimiterObject', useSQLite: true } },
  })
  const ask = async (path = '/', method = 'GET') => {
    const response = await mf.dispatchFetch(`http://worker.test${path}`, {
      method,
      headers: { 'CF-Connecting-IP': '203.0.113.7' },
    })
    return `${response.status} ${await response.text()}`
  }
  try {
    const answers: string[] = []
    for (let i = 0; i < 3; i++) answers.push(await ask())
    if (
      answers[0] !== '200 undefined Cloudflare-Workers' ||
      answers[1]?.slice(0, 3) !== '200' ||
      answers[2]?.slice(0, 3) !== '429'
    )
      throw new Error(`answers ${JSON.stringify(answers)}`)
    // The client's key is its address. Raised to 4 with 2 used: two more, then refused; blocked: refused at once.
    const operated = [await ask('/admin/203.0.113.7/raise', 'POST')]
    for (let i = 0; i < 3; i++) operated.push((await ask()).slice(0, 3))
    operated.push((await ask('/admin/203.0.113.7/block', 'POST')).slice(0, 3), await ask())
    if (
      operated.slice(0, 5).join() !== '200 raised,200,200,429,200' ||
      !/^429 .*Blocked by an operator/.test(operated[5] ?? '')
    )
      throw new Error(`after the override and the block: ${JSON.stringify(operated)}`)
  } finally {
    await mf.dispose()
  }
}

/** A standalone redis-server and a 3-master Cluster (test/support's harness), started together. */
function startRedis(): Promise<PromiseSettledResult<RedisServer | RedisClusterProcesses>[]> {
  return Promise.allSettled([RedisServer.start(), RedisClusterProcesses.start(3)])
}

/**
 * Runs REDIS_OVERRIDES_RUN in the project against the servers `startRedis` started (while the project installed),
 * then stops them.
 */
async function runOnRedis(dir: string, started: ReturnType<typeof startRedis>): Promise<void> {
  writeFileSync(join(dir, 'redis-overrides.mjs'), REDIS_OVERRIDES_RUN)
  const servers = await started
  try {
    const [standalone, cluster] = servers.map((server) => {
      if (server.status === 'rejected') throw server.reason
      return server.value
    }) as [RedisServer, RedisClusterProcesses]
    const env = {
      ...process.env,
      REDIS_PORT: String(standalone.port),
      CLUSTER_NODES: JSON.stringify(cluster.startupNodes),
    }
    const { stdout } = await run(process.execPath, ['redis-overrides.mjs'], {
      cwd: dir,
      env,
      timeout: 60_000,
    })
    if (stdout.trim() !== 'ok') throw new Error(`expected "ok", printed ${JSON.stringify(stdout)}`)
  } finally {
    await Promise.all(
      servers.map((server) => (server.status === 'fulfilled' ? server.value.stop() : undefined)),
    )
  }
}

/** moduleResolution modes checked per module system (bundler resolution implies an ESM-style program). */
const MODES = {
  esm: { node16: 'node16', nodenext: 'nodenext', bundler: 'esnext' },
  cjs: { node16: 'node16', nodenext: 'nodenext' },
} as const

/**
 * Checks that fail today for a known reason, with the issue that fixes them: reported, not counted as failures
 * while they fail; a known failure that passes fails the run, so that its entry is deleted.
 */
const KNOWN_FAILURES = new Map<string, string>()

/** What a step does, for the `--timings` table. */
type Kind =
  | 'metadata'
  | 'pack'
  | 'built-in scan'
  | 'npm install'
  | 'tsc 5.9'
  | 'tsc 7'
  | 'program run'
  | 'test suite'
  | 'workerd bundle+run'
  | 'redis run'
  | 'no @types/node'
  | 'remove'

interface Outcome {
  name: string
  ok: boolean
  detail?: string
}
const outcomes: Outcome[] = []

/** Timed work for `--timings`: each step, and each batched typecheck as a whole. */
interface Span {
  kind: Kind
  name: string
  /** Start and end, in ms (performance.now()). */
  start: number
  end: number
}
const spans: Span[] = []

async function timed<T>(kind: Kind, name: string, action: () => Promise<T>): Promise<T> {
  const start = performance.now()
  try {
    return await action()
  } finally {
    spans.push({ kind, name, start, end: performance.now() })
  }
}

/** What a failed action printed, or its message. */
function detailOf(error: unknown): string {
  const e = error as { stdout?: string; stderr?: string; message?: string }
  return [e?.stdout, e?.stderr].filter(Boolean).join('\n').trim() || e?.message || String(error)
}

/** Records one check's outcome (`failure`: what it printed; none when it passed), KNOWN_FAILURES applied. */
function report(name: string, failure?: string): void {
  const known = KNOWN_FAILURES.get(name)
  if (failure === undefined && known) {
    outcomes.push({ name, ok: false, detail: 'passes now: delete it from KNOWN_FAILURES' })
    console.log(`  ✗ ${name}: a known failure (${known}) passes now: delete it from KNOWN_FAILURES`)
  } else if (failure === undefined) {
    outcomes.push({ name, ok: true })
    console.log(`  ✓ ${name}`)
  } else if (known) {
    outcomes.push({ name, ok: true })
    console.log(`  ✓ ${name} fails as known: ${known}`)
  } else {
    outcomes.push({ name, ok: false, detail: failure })
    console.log(`  ✗ ${name}\n${failure.replace(/^/gm, '      ')}`)
  }
}

/** Runs one check and reports it; true when its action succeeded (before KNOWN_FAILURES). */
async function step(kind: Kind, name: string, action: () => Promise<unknown>): Promise<boolean> {
  let failure: string | undefined
  try {
    await timed(kind, name, action)
  } catch (error) {
    failure = detailOf(error) || 'failed'
  }
  report(name, failure)
  return failure === undefined
}

/** One typecheck: a tsconfig in a project's `esm` or `cjs` sub-project, its own program and options. */
interface Typecheck {
  name: string
  system: 'esm' | 'cjs'
  config: string
}

/**
 * Typechecks a project's configs with one compiler in one `tsc -b --force` (build mode parses the files the
 * configs share once, and starts the compiler once): each config is still its own program with its own options,
 * and the run fails if any has an error, as `tsc -p` of each would. When it fails, each config runs alone with
 * `tsc -p`, so that every failure is reported under its own check's name.
 */
async function typecheck(version: Version, tsc: string, dir: string, checks: Typecheck[]): Promise<void> {
  if (checks.length === 0) return
  const kind = `tsc ${version}` as const
  const batch = `${kind} -b ${basename(dir)} (${checks.length} configs)`
  // TypeScript 7 checks with several threads by default; here, where one check per core runs already, one thread
  // each gives the same diagnostics for about a third less CPU.
  const flags = version === '7' ? ['--singleThreaded'] : []
  let failure: string | undefined
  try {
    await timed(kind, batch, () =>
      run(
        process.execPath,
        [tsc, '-b', '--force', ...flags, ...checks.map((c) => `${c.system}/${c.config}`)],
        {
          cwd: dir,
          maxBuffer: 16 * 1024 * 1024,
        },
      ),
    )
  } catch (error) {
    failure = detailOf(error) || 'failed'
  }
  if (failure === undefined) {
    for (const check of checks) report(check.name)
    return
  }
  let passedAlone = 0
  for (const check of checks)
    if (
      await step(kind, check.name, () =>
        run(process.execPath, [tsc, '-p', check.config, ...flags], {
          cwd: join(dir, check.system),
          maxBuffer: 16 * 1024 * 1024,
        }),
      )
    )
      passedAlone++
  if (passedAlone === checks.length) report(`${batch}: each config passes alone, the batch failed`, failure)
}

/** Runs at most `size` tasks at once; the others wait in order. */
function limiter(size: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0
  const waiting: (() => void)[] = []
  return async (task) => {
    if (active < size) active++
    else await new Promise<void>((resolve) => waiting.push(resolve)) // the slot is handed over
    try {
      return await task()
    } finally {
      const next = waiting.shift()
      if (next) next()
      else active--
    }
  }
}

/**
 * `--timings`: per kind of work, how many ran, their summed and longest seconds, and the wall-clock span from the
 * first start to the last end (work runs concurrently, so kinds overlap), then the slowest.
 */
function printTimings(total: number): void {
  const s = (ms: number) => (ms / 1000).toFixed(1)
  const kinds = [...new Set(spans.map((span) => span.kind))]
  const rows = kinds.map((kind) => {
    const of = spans.filter((span) => span.kind === kind)
    const durations = of.map((span) => span.end - span.start)
    const wall = Math.max(...of.map((span) => span.end)) - Math.min(...of.map((span) => span.start))
    return [
      kind,
      String(of.length),
      s(durations.reduce((a, b) => a + b, 0)),
      s(Math.max(...durations)),
      s(wall),
    ]
  })
  const table = [['kind', 'runs', 'sum s', 'max s', 'wall s'], ...rows]
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => row[column]!.length)))
  console.log('\ntimings (wall s: first start to last end of that kind; kinds overlap)')
  for (const row of table)
    console.log(`  ${row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ')}`)
  console.log(`  total ${s(total)} s; slowest:`)
  for (const span of [...spans].sort((a, b) => b.end - b.start - (a.end - a.start)).slice(0, 15))
    console.log(`  ${s(span.end - span.start).padStart(6)}  ${span.name}`)
}

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

function checkMetadata(): void {
  for (const name of packages) {
    const manifest = JSON.parse(readFileSync(join(root, 'packages', name, 'package.json'), 'utf8'))
    const missing = REQUIRED_FIELDS.filter((field) => manifest[field] === undefined)
    if (missing.length > 0) throw new Error(`packages/${name}/package.json lacks ${missing.join(', ')}`)
    if (manifest.repository?.directory !== `packages/${name}`)
      throw new Error(`packages/${name}/package.json: repository.directory must be "packages/${name}"`)
  }
}

/**
 * Writes a project's programs, tsconfigs and run files into `dir`; returns its typechecks per TypeScript version
 * and its other checks.
 */
function prepare(
  project: Project,
  dir: string,
): { typechecks: Record<Version, Typecheck[]>; checks: (() => Promise<unknown>)[] } {
  const typechecks: Record<Version, Typecheck[]> = { '5.9': [], '7': [] }
  const checks: (() => Promise<unknown>)[] = []
  for (const system of ['esm', 'cjs'] as const) {
    const sub = join(dir, system)
    mkdirSync(sub)
    writeFileSync(
      join(sub, 'package.json'),
      system === 'esm' ? '{ "type": "module" }\n' : '{ "type": "commonjs" }\n',
    )
    for (const [file, source] of Object.entries(project.programs)) writeFileSync(join(sub, file), source)
    for (const [resolution, module] of Object.entries(MODES[system]))
      for (const program of Object.keys(project.programs))
        for (const version of project.typescripts) {
          // With skipLibCheck, nodenext adds nothing to node16 here; TypeScript 7 checks both in full.
          if (version === '5.9' && resolution === 'nodenext' && !project.noNodeTypes) continue
          if (project.skip?.({ system, resolution, version, program })) continue
          // One config per check, complete in itself (`tsc -p` it to see one check alone, with KEEP=1).
          const config = `tsconfig.${resolution}.${program.replace(/\.ts$/, '')}.typescript-${version}.json`
          const compilerOptions = {
            target: 'ES2022',
            lib: ['ES2023'],
            module,
            moduleResolution: resolution,
            strict: true,
            noEmit: true,
            skipLibCheck: (version === '5.9' && !project.noNodeTypes) || project.skipLibCheck === true,
            esModuleInterop: true,
            types: project.noNodeTypes ? [] : ['node'],
            ...(project.decorators ? { experimentalDecorators: true, emitDecoratorMetadata: true } : {}),
          }
          writeFileSync(
            join(sub, config),
            `${JSON.stringify({ compilerOptions, files: [program] }, null, 2)}\n`,
          )
          typechecks[version].push({
            name: `typecheck ${project.name} ${system} ${resolution} TypeScript ${version}: ${program}`,
            system,
            config,
          })
        }
  }
  for (const [file, source] of Object.entries(project.runs)) {
    writeFileSync(join(dir, file), source)
    checks.push(() =>
      step('program run', `run ${project.name} ${file}`, async () => {
        const { stdout } = await run(process.execPath, [file], { cwd: dir, timeout: 30_000 })
        if (stdout.trim() !== 'ok') throw new Error(`expected "ok", printed ${JSON.stringify(stdout)}`)
      }),
    )
  }
  for (const suite of project.suites ?? []) {
    for (const [file, source] of Object.entries(suite.files)) writeFileSync(join(dir, file), source)
    checks.push(() =>
      step('test suite', `test ${project.name} with ${suite.name}`, () =>
        run(process.execPath, suite.command, { cwd: dir, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }),
      ),
    )
  }
  if (project.name === 'cloudflare-workers') {
    checks.push(() =>
      step(
        'workerd bundle+run',
        'cloudflare-workers: a Worker bundled from the tarballs answers 200, 200, 429 in workerd (no nodejs_compat), then honours an override and a block set from its admin routes at the next request',
        () => runInWorkerd(dir),
      ),
    )
  }
  if (project.name === 'redis-overrides') {
    // Started now, so that the Cluster forms while the project installs.
    const started = startRedis()
    checks.push(() =>
      step(
        'redis run',
        'redis-overrides: the packed core on a standalone redis-server and a 3-master Cluster honours an override, a block and an unblock set by another limiter at the next decision',
        () => runOnRedis(dir, started),
      ),
    )
  }
  if (project.noNodeTypes) {
    checks.push(() =>
      step('no @types/node', `${project.name} installs no @types/node`, async () => {
        const types = join(dir, 'node_modules', '@types')
        let entries: string[] = []
        try {
          entries = readdirSync(types)
        } catch {}
        if (entries.length > 0) throw new Error(`node_modules/@types holds ${entries.join(', ')}`)
      }),
    )
  }
  return { typechecks, checks }
}

async function main(): Promise<void> {
  const started = performance.now()
  console.log(`Packed tarballs, checked as users install them (in ${work})`)
  await step('metadata', 'package.json metadata (repository, homepage, bugs, keywords, license)', async () =>
    checkMetadata(),
  )

  const tarballDir = join(work, 'tarballs')
  mkdirSync(tarballDir)
  // One pnpm packs them all (the same tarballs, byte for byte, as a `pnpm pack` in each package).
  await step('pack', 'pnpm pack every package', () =>
    run('pnpm', ['-r', '--filter', './packages/*', 'pack', '--pack-destination', tarballDir], { cwd: root }),
  )
  const tarballs = Object.fromEntries(
    packages.map((name) => {
      const file = readdirSync(tarballDir).find((entry) => entry.startsWith(`ratewindow-${name}-`))
      if (!file) throw new Error(`pnpm pack produced no tarball for @ratewindow/${name}`)
      return [name, join(tarballDir, file)]
    }),
  ) as Record<Package, string>
  const packed = performance.now()

  // Core, the Hono adapter and the Durable Object store load on Workers without nodejs_compat: their packed
  // builds import no Node module and use no unguarded Node global (scripts/web-standard.ts).
  for (const name of ['core', 'hono', 'cloudflare'] as const) {
    await step(
      'built-in scan',
      `@ratewindow/${name} tarball: no Node built-in import, no unguarded Node global`,
      async () => {
        const unpacked = join(work, `${name}-unpacked`)
        mkdirSync(unpacked)
        await run('tar', ['-xzf', tarballs[name], '-C', unpacked])
        const problems: string[] = []
        for (const file of ['index.js', 'index.cjs']) {
          const { uses, gone } = unexcusedUses(
            readFileSync(join(unpacked, 'package', 'dist', file), 'utf8'),
            file,
          )
          if (uses.length > 0) problems.push(describeUses(`dist/${file}`, uses))
          for (const each of gone)
            problems.push(`dist/${file} no longer imports ${each}: delete it from KNOWN_NODE_IMPORTS`)
        }
        if (problems.length > 0) throw new Error(problems.join('\n'))
      },
    )
  }

  // Installs and checks overlap: a project's checks start once its own install (and, for its typechecks, the
  // TypeScript install) is done. At most one install and one check per core run at once.
  const cores = availableParallelism()
  const installSlot = limiter(cores)
  const checkSlot = limiter(cores)

  // TypeScript itself is installed once beside the projects; `typescript7` is the native port (npm `typescript@7`).
  const tools = join(work, 'tools')
  mkdirSync(tools)
  writeFileSync(join(tools, 'package.json'), '{ "private": true }\n')
  const toolsInstalled = installSlot(() =>
    step('npm install', 'install TypeScript 5.9 and 7', () =>
      npmInstall(tools, ['typescript@5.9', 'typescript7@npm:typescript@7']),
    ),
  )
  const tsc: Record<Version, string> = {
    '5.9': join(tools, 'node_modules', 'typescript', 'bin', 'tsc'),
    '7': join(tools, 'node_modules', 'typescript7', 'bin', 'tsc'),
  }

  // The longest installs first (more packages asked for, roughly more to install), so that the last install to
  // end, and the checks waiting on it, are short ones.
  const specs = (project: Project) => project.tarballs.length + project.dependencies.length
  const only = process.env.ONLY?.split(',')
  const chosen = only === undefined ? projects : projects.filter((project) => only.includes(project.name))
  const byInstall = [...chosen].sort((a, b) => specs(b) - specs(a))
  await Promise.all(
    byInstall.map(async (project) => {
      const dir = join(work, project.name)
      mkdirSync(dir)
      writeFileSync(join(dir, 'package.json'), `{ "name": "check-${project.name}", "private": true }\n`)
      const { typechecks, checks } = prepare(project, dir)
      await installSlot(() =>
        step(
          'npm install',
          `install ${project.name}: ${[...project.tarballs.map((t) => `@ratewindow/${t}.tgz`), ...project.dependencies].join(' ')}`,
          () => npmInstall(dir, [...project.tarballs.map((name) => tarballs[name]), ...project.dependencies]),
        ),
      )
      await Promise.all([
        ...(['5.9', '7'] as const).map(async (version) => {
          await toolsInstalled
          await checkSlot(() => typecheck(version, tsc[version], dir, typechecks[version]))
        }),
        ...checks.map((check) => checkSlot(check)),
      ])
      // Thousands of files: removed while other projects are still checked, not all at the end.
      if (!keep)
        await timed('remove', `remove ${project.name}`, () => rm(dir, { recursive: true, force: true }))
    }),
  )
  if (!keep)
    await timed('remove', 'remove the tools and tarballs', () => rm(work, { recursive: true, force: true }))
  const done = performance.now()

  const failed = outcomes.filter((outcome) => !outcome.ok)
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
  console.log(
    `\npack ${seconds(packed - started)}, installs and checks ${seconds(done - packed)}, total ${seconds(done - started)}`,
  )
  if (process.argv.includes('--timings')) printTimings(done - started)
  console.log(`package checks: ${outcomes.length - failed.length} passed, ${failed.length} failed`)
  if (keep) console.log(`kept ${work}`)
  if (failed.length > 0) {
    console.log(`failed:\n${failed.map((outcome) => `  ${outcome.name}`).join('\n')}`)
    process.exitCode = 1
  }
}

await main()
