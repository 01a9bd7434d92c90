/**
 * Docs that run: every code block of README.md, packages/* /README.md, docs/*.md, docs/from/*.md and
 * examples/* /README.md is checked (conventions in CONTRIBUTING.md). TypeScript blocks typecheck under the
 * repository's strict settings against the workspace packages; `run` blocks execute and the values their comments
 * show are asserted; `serve` blocks and examples start on a free loopback port and must answer the annotated
 * statuses; JSON blocks parse; `pnpm <script>` commands name scripts that exist.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, sep } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { slots } from '../../scripts/check-packages/slots.js'
import { RedisServer } from '../support/redis-server.js'
import {
  allDocChecks,
  docFiles,
  moduleName,
  moduleSource,
  pnpmScripts,
  root,
  runnableSource,
  type ServeCheck,
  type Snippet,
  TYPESCRIPT,
  workspaceScripts,
} from './snippets.js'

const exec = promisify(execFile)
const work = join(root, 'node_modules', '.cache', 'docs-check')
const { snippets, serves } = allDocChecks()
const typescript = snippets.filter((snippet) => TYPESCRIPT.has(snippet.lang) && !snippet.skip)
/** Whether the packages' builds are current (see `packagesBuilt`): the checks then use them, not the sources. */
const built = packagesBuilt()

/**
 * Checks that fail today for a known reason, with the issue that fixes them. `it.fails` keeps CI green while they
 * fail and turns it red once they pass: then delete the entry.
 */
const KNOWN_FAILURES = new Map<string, string>()
const checkNames = new Set<string>()
const check = (name: string) => {
  checkNames.add(name)
  return KNOWN_FAILURES.has(name) ? it.fails : it
}

/** tsc diagnostics by snippet, mapped back to doc lines. */
const diagnostics = new Map<Snippet, string[]>()

beforeAll(async () => {
  rmSync(work, { recursive: true, force: true })
  mkdirSync(work, { recursive: true })
  const byModule = new Map<string, { snippet: Snippet; preludeLines: number }>()
  for (const snippet of typescript) {
    const { source, preludeLines } = moduleSource(snippet)
    writeFileSync(join(work, `${moduleName(snippet)}.ts`), source)
    byModule.set(moduleName(snippet), { snippet, preludeLines })
    diagnostics.set(snippet, [])
  }
  writeFileSync(join(work, 'package.json'), '{ "type": "module" }\n')
  writeFileSync(
    join(work, 'tsconfig.json'),
    JSON.stringify({
      extends: '../../../tsconfig.base.json',
      compilerOptions: {
        noEmit: true,
        declaration: false,
        sourceMap: false,
        // Built, the blocks typecheck against the packages' published declarations, as users' code does; the
        // packages' sources are typechecked by `pnpm typecheck` (checked here too, they were most of this tsc's
        // work). Unbuilt, against the sources.
        customConditions: built ? [] : ['@ratewindow/source'],
      },
      include: ['*.ts'],
    }),
  )
  // TypeScript 7, the version `npm install typescript` gives a new user (test/typescript7/): a sixth of 5.9's CPU
  // here (3.6 s against 21); check:packages checks the published types on 5.9 as well.
  const tsc = join(root, 'test', 'typescript7', 'node_modules', 'typescript', 'bin', 'tsc')
  const options = ['-p', join(work, 'tsconfig.json'), '--pretty', 'false', '--singleThreaded']
  const output = await exec(process.execPath, [tsc, ...options], {
    cwd: root,
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    ({ stdout }) => stdout,
    (error: { stdout?: string }) => error.stdout ?? String(error),
  )
  let last: Snippet | undefined
  for (const line of output.split('\n')) {
    const match = /([\w.-]+)\.ts\((\d+),(\d+)\): (error TS\d+: .*)$/.exec(line)
    const found = match && byModule.get(match[1]!)
    if (!found) {
      // The lines that explain a diagnostic belong to it; anything else (a broken tsconfig) fails every block.
      if (line.trim() === '') continue
      for (const snippet of /^\s/.test(line) && last ? [last] : typescript)
        diagnostics.get(snippet)!.push(line)
      continue
    }
    last = found.snippet
    const codeLine = Number(match[2]) - found.preludeLines
    const where =
      codeLine < 1
        ? `prelude of ${found.snippet.at}`
        : `${found.snippet.doc}:${found.snippet.line + codeLine - 1}`
    diagnostics.get(found.snippet)!.push(`${where}: ${match[4]}`)
  }
}, 300_000)

describe('TypeScript blocks typecheck under strict', () => {
  for (const snippet of typescript) {
    check(`typecheck ${snippet.at}`)(`typecheck ${snippet.at}`, () => {
      expect(diagnostics.get(snippet)).toEqual([])
    })
  }
})

describe('run blocks run, showing the values their comments show', () => {
  const runs = snippets.filter((snippet) => snippet.run)
  const fileOf = (snippet: Snippet) => join(work, `${moduleName(snippet)}.run.ts`)
  // All the blocks in one process, each imported in turn (test/docs/run-blocks.ts): the sources load once.
  let results: Record<string, string> = {}
  beforeAll(async () => {
    for (const snippet of runs) writeFileSync(fileOf(snippet), runnableSource(snippet).source)
    const resultsFile = join(work, 'run-results.json')
    const runner = join(import.meta.dirname, 'run-blocks.ts')
    const ran = await exec(
      process.execPath,
      ['--conditions=@ratewindow/source', '--import', 'tsx', runner, resultsFile, ...runs.map(fileOf)],
      { cwd: root, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 },
    ).then(
      () => 'ok',
      (error: { stderr?: string; message: string }) => error.stderr || error.message,
    )
    expect(ran).toBe('ok')
    results = JSON.parse(readFileSync(resultsFile, 'utf8'))
  }, 180_000)

  it.each(runs.map((snippet) => [snippet.at, snippet] as const))('%s', (_at, snippet) => {
    expect(results[fileOf(snippet)]).toBe('ok')
  })
  it('the blocks leave nothing running once they are done', () => {
    expect(results['']).toBe('ok')
  })
})

/** The newest modification time of the files under `dir` (0 when it does not exist). */
function newest(dir: string): number {
  if (!existsSync(dir)) return 0
  return Math.max(
    0,
    ...readdirSync(dir, { withFileTypes: true }).map((entry) =>
      entry.isDirectory() ? newest(join(dir, entry.name)) : statSync(join(dir, entry.name)).mtimeMs,
    ),
  )
}

/**
 * Whether every package's build is at least as new as its sources (as in `pnpm test:all`, which builds first):
 * the blocks then typecheck against the built declarations, and the served programs are compiled ahead by esbuild
 * (`compileServed`) and run by plain node on the built packages; else the blocks typecheck against the packages'
 * sources, and node runs the served programs under tsx on them.
 */
function packagesBuilt(): boolean {
  const packages = readdirSync(join(root, 'packages'))
  return packages.every((name) => {
    const dir = join(root, 'packages', name)
    return newest(join(dir, 'dist')) >= newest(join(dir, 'src'))
  })
}

/**
 * Compiles the served programs with esbuild, each file as it stands (no bundling: every import stays an import),
 * into `<dir>/node_modules/.cache/docs-serve/` of the program's own directory, where node resolves its packages
 * as from the program; resolves with the compiled file of each program. A block compiles under the tsconfig it
 * was typechecked with (decorators as Nest compiles them), an example with its whole src/ (its relative imports)
 * under the one tsx would find. Node then runs plain JavaScript: tsx's loader, which transformed each program at
 * each start, cost about half of a served program's CPU.
 */
async function compileServed(programs: { file: string; tsconfig?: string }[]): Promise<Map<string, string>> {
  const { build } = await import('esbuild')
  const compiled = new Map<string, string>()
  const byDir = new Map<string, { file: string; tsconfig?: string }[]>()
  for (const program of programs) {
    const dir = dirname(program.file)
    byDir.set(dir, [...(byDir.get(dir) ?? []), program])
  }
  await Promise.all(
    [...byDir].map(async ([dir, inDir]) => {
      // A block's directory is the docs work directory (under root/node_modules), an example's is its src/.
      const outdir = dir.includes(`${sep}node_modules${sep}`)
        ? join(dir, 'served')
        : join(dirname(dir), 'node_modules', '.cache', 'docs-serve', basename(dir))
      rmSync(outdir, { recursive: true, force: true })
      mkdirSync(outdir, { recursive: true })
      // The files' package scope: node looks no further up than node_modules for a package.json's `type`.
      writeFileSync(join(outdir, 'package.json'), '{ "type": "module" }\n')
      const entryPoints = dir.includes(`${sep}node_modules${sep}`)
        ? inDir.map((program) => program.file)
        : readdirSync(dir)
            .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
            .map((name) => join(dir, name))
      await build({
        entryPoints,
        outdir,
        format: 'esm',
        platform: 'node',
        target: 'node20',
        sourcemap: 'inline',
        logLevel: 'silent',
        ...(inDir[0]!.tsconfig === undefined ? {} : { tsconfig: inDir[0]!.tsconfig }),
      })
      for (const program of inDir)
        compiled.set(program.file, join(outdir, basename(program.file).replace(/\.ts$/, '.js')))
    }),
  )
  return compiled
}

describe('servers start and answer the statuses their docs promise', () => {
  let redis: Promise<RedisServer> | undefined
  const children = new Set<ChildProcess>()
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL')
    await (await redis)?.stop()
  })
  // Two servers at a time: each check mostly waits for its process to start.
  const place = slots(2)

  const checks: [string, ServeCheck, Snippet | undefined][] = [
    ...snippets
      .filter((snippet) => snippet.serve)
      .map((snippet) => [`serve ${snippet.at}`, snippet.serve!, snippet] as [string, ServeCheck, Snippet]),
    ...serves.map((serve) => [`serve ${serve.at}`, serve, undefined] as [string, ServeCheck, undefined]),
  ]
  const programOf = (serve: ServeCheck, snippet: Snippet | undefined) =>
    serve.file ?? join(work, `${moduleName(snippet!)}.ts`)
  let compiled: Promise<Map<string, string>> | undefined
  beforeAll(() => {
    if (built)
      compiled = compileServed(
        checks.map(([, serve, snippet]) => ({
          file: programOf(serve, snippet),
          tsconfig: snippet === undefined ? undefined : join(work, 'tsconfig.json'),
        })),
      )
  })
  for (const [name, serve, snippet] of checks) {
    check(name).concurrent(name, () =>
      place(async () => {
        const file = programOf(serve, snippet)
        const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: 'production' }
        delete env.REDIS_URL
        delete env.REDIS_CLUSTER
        // tsx applies a tsconfig only to the files it includes: a block runs under the one it was typechecked with
        // (decorators as Nest compiles them, for one).
        if (snippet !== undefined) env.TSX_TSCONFIG_PATH = join(work, 'tsconfig.json')
        if (serve.redis) {
          redis ??= RedisServer.start()
          env.REDIS_URL = `redis://127.0.0.1:${(await redis).port}`
        }
        const preload = pathToFileURL(join(import.meta.dirname, 'listen-on-free-port.mjs')).href
        // Unbuilt: tsx's ESM loader alone. With its CommonJS hook too, a CommonJS package that requires an ES module
        // (such as @nestjs/throttler requiring Nest 12's @nestjs/core) gets a second copy of it, and Nest cannot
        // inject the first copy's classes into the second's; Node's own require() of ES modules shares one, as in
        // production.
        const program = built
          ? ['--enable-source-maps', (await compiled!).get(file)!]
          : ['--conditions=@ratewindow/source', '--import', 'tsx/esm', file]
        const child = spawn(process.execPath, ['--import', preload, ...program], {
          cwd: root,
          env,
          stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        })
        children.add(child)
        let output = ''
        child.stdout!.on('data', (data) => (output += data))
        child.stderr!.on('data', (data) => (output += data))
        try {
          const port = await new Promise<number>((resolve, reject) => {
            const timer = setTimeout(
              () => reject(new Error(`no server listening after 60 s:\n${output}`)),
              60_000,
            )
            child.on('message', (message: { port?: number }) => {
              if (typeof message.port === 'number') {
                clearTimeout(timer)
                resolve(message.port)
              }
            })
            child.on('exit', (code) => {
              clearTimeout(timer)
              reject(new Error(`exited with code ${code} before listening:\n${output}`))
            })
          })
          const seen: string[] = []
          const expected: string[] = []
          for (const step of serve.steps) {
            for (let n = 0; n < step.times; n++) {
              const response = await fetch(`http://127.0.0.1:${port}${step.path}`, { method: step.method })
              await response.arrayBuffer()
              const present = step.headers.filter((name) => response.headers.has(name))
              const withHeaders = (names: string[]) => (names.length > 0 ? ` with ${names.join(', ')}` : '')
              seen.push(`${step.method} ${step.path} → ${response.status}${withHeaders(present)}`)
              expected.push(`${step.method} ${step.path} → ${step.status}${withHeaders(step.headers)}`)
            }
          }
          expect(seen).toEqual(expected)
        } finally {
          child.kill('SIGTERM')
          children.delete(child)
        }
      }),
    )
  }

  it('every example is started by a serve check', () => {
    const examples = docFiles().filter((doc) => doc.startsWith('examples/'))
    const started = new Set(serves.map((serve) => serve.at.split(':')[0]))
    expect(examples.filter((doc) => !started.has(doc))).toEqual([])
  })
})

describe('known failures', () => {
  it('name checks that exist (a stale entry is deleted, not kept)', () => {
    expect([...KNOWN_FAILURES.keys()].filter((name) => !checkNames.has(name))).toEqual([])
  })
})

describe('JSON blocks parse', () => {
  const json = snippets.filter((snippet) => snippet.lang === 'json' && !snippet.skip)
  it.each(json.map((snippet) => [snippet.at, snippet] as const))('%s', (_at, snippet) => {
    expect(() => JSON.parse(snippet.code)).not.toThrow()
  })
})

describe('pnpm commands in the docs name scripts that exist', () => {
  const scripts = workspaceScripts()
  const commands: [string, string | undefined, string][] = []
  for (const doc of docFiles()) {
    const lines = readFileSync(join(root, doc), 'utf8').split('\n')
    let inShell = false
    lines.forEach((line, index) => {
      if (/^```/.test(line)) inShell = !inShell && /^```(sh|bash|shell)\s*$/.test(line)
      const texts = inShell ? [line] : [...line.matchAll(/`(pnpm [^`]+)`/g)].map((match) => match[1]!)
      for (const text of texts) {
        for (const [filter, script] of pnpmScripts(text))
          commands.push([`${doc}:${index + 1}`, filter, script])
      }
    })
  }
  it('finds the commands', () => {
    expect(commands.length).toBeGreaterThan(5)
  })
  it.each(commands)('%s: pnpm %s %s', (_at, filter, script) => {
    const known = scripts.get(filter)
    expect(known, `no workspace package named ${filter}`).toBeDefined()
    expect([...known!]).toContain(script)
  })
})

describe('fenced blocks have a language the checks know', () => {
  const KNOWN = new Set([...TYPESCRIPT, 'json', 'sh', 'bash', 'shell', ''])
  it.each(snippets.map((snippet) => [snippet.at, snippet.lang] as const))('%s: "%s"', (_at, lang) => {
    expect(KNOWN.has(lang)).toBe(true)
  })
})
