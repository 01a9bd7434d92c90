/**
 * The published declarations (issue 20, item 9): `stripInternal` keeps `@internal` members off the public
 * types, and what remains still typechecks on its own (a public declaration naming a stripped one would break
 * every user's build). Emitted here with the package's own tsconfig, as tsup does.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import ts from 'typescript'
import { afterAll, describe, expect, it } from 'vitest'

const root = new URL('..', import.meta.url).pathname
const out = mkdtempSync(join(tmpdir(), 'ratewindow-dts-'))
afterAll(() => rmSync(out, { recursive: true, force: true }))

function emitDeclarations(): void {
  const configPath = join(root, 'tsconfig.json')
  const config = ts.getParsedCommandLineOfConfigFile(
    configPath,
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} },
  )!
  // Every entry point: the root and the kits (`@ratewindow/core/adapter`, …).
  const entries = readdirSync(join(root, 'src/entries')).map((file) => join(root, 'src/entries', file))
  const program = ts.createProgram([join(root, 'src/index.ts'), ...entries], {
    ...config.options,
    declaration: true,
    emitDeclarationOnly: true,
    noEmit: false,
    sourceMap: false,
    declarationMap: false,
    outDir: out,
    rootDir: join(root, 'src'),
  })
  const result = program.emit()
  expect(result.diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([])
}

describe('published declarations of @ratewindow/core', () => {
  it('leave @internal members out, and typecheck on their own', () => {
    emitDeclarations()
    const limiter = readFileSync(join(out, 'limiter/limiter.d.ts'), 'utf8')
    expect(limiter).toContain('limit(key: string')
    expect(limiter).not.toContain('limitNow')
    const http = readFileSync(join(out, 'http/engine.d.ts'), 'utf8')
    expect(http).toContain('followSettle(')
    expect(http).not.toMatch(/\blimiter\?: RateLimiter/)
    expect(readFileSync(join(out, 'http/access-list.d.ts'), 'utf8')).not.toContain('keyed')
    const check = ts.createProgram([join(out, 'index.d.ts')], {
      strict: true,
      noEmit: true,
      skipLibCheck: false,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      target: ts.ScriptTarget.ES2022,
      types: ['node'],
      typeRoots: [join(root, '../../node_modules/@types')],
    })
    const problems = ts
      .getPreEmitDiagnostics(check)
      .filter((d) => d.file?.fileName.startsWith(out))
      .map(
        (d) =>
          `${d.file!.fileName.slice(out.length)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
      )
    expect(problems).toEqual([])
  }, 60_000)
})
