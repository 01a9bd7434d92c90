/**
 * The layout of the code (issue 31): packages/core/src by layer, imports one way down and in no circle, and the
 * size limits of every source file under packages/*\/src. Reads the sources only: no build, no network.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

/**
 * The layers of packages/core/src, top to bottom. A file may import files of its own layer and of any row below
 * it; layers side by side in one row do not import each other. A layer is a folder (`name/`, sub-folders listed
 * in a row of their own excepted) or a set of top-level files (`a.ts + b.ts`). Every file belongs to one.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['index.ts + entries/'], //                 the public faces: the root's and the kits' export lists, nothing else
  ['slow-down/'], //                         slowDown(): delays instead of refusing, on the HTTP engine
  ['http/'], //                              the framework-neutral HTTP engine, its options, keys, headers, bodies
  ['limiter/'], //                           RateLimiter, ConcurrencyLimiter, their options, caches and namespaces
  ['operator/'], //                          operating keys live: overrides, blocks, give/take, inspect, top, stored state
  ['gateway/'], //                           every store call: timeout, circuit breakers, reporting, late refunds
  ['observe.ts + result.ts'], //             events and results, shared by the limiters and the engine
  ['stores/synced/'], //                     SyncedStore: local decisions synced to Redis
  ['stores/local/', 'stores/redis/'], //     JavaScript deciding beside the state; one Redis script per call
  ['stores/'], //                            what every store shares: the Store contract, call bounds
  ['algorithms/'], //                        the rule factories and their pure decisions (and penalties)
  ['support/', 'time/'], //                  no ratewindow concept: errors, durations, hashes; timers and clocks
]

/**
 * Imports that still run up a layer (`from → to`, paths in packages/core/src), each until the milestone of issue
 * 31 that moves the code they need. Empty at the end of the issue; an entry whose import is gone must leave.
 */
const UPWARD_IMPORTS_ALLOWED: readonly string[] = []

/** No source file over this many lines. */
const MAX_FILE_LINES = 500
/** No class or function (methods, arrow functions and constructors included) over this many lines. */
const MAX_UNIT_LINES = 350

/**
 * The files and units over the limits today, at their size today (lines, from the unit's first token to its
 * last): they may shrink, never grow. One that shrinks gets its number lowered here; one within the limit leaves
 * the list. Issue 31's later milestones empty it.
 */
const KNOWN_OVERSIZE: Record<string, number> = {}

const root = fileURLToPath(new URL('../../../', import.meta.url))
const coreSrc = join(root, 'packages/core/src')

/** Every `.ts` file under `dir`, as absolute paths, sorted. */
function sourcesUnder(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f))
    .sort()
}

const allSources = readdirSync(join(root, 'packages'))
  .map((p) => join(root, 'packages', p, 'src'))
  .filter(existsSync)
  .flatMap(sourcesUnder)

const parse = (file: string) =>
  ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)

/** A path relative to core's src, with forward slashes. */
const inCore = (file: string) => relative(coreSrc, file).split('\\').join('/')
const inRepo = (file: string) => relative(root, file).split('\\').join('/')

const importCache = new Map<string, string[]>()

/** The core files `file` imports (static, type-only, re-exports and dynamic `import()`), as absolute paths. */
function importsOf(file: string): string[] {
  let targets = importCache.get(file)
  if (targets === undefined) {
    targets = readImports(file)
    importCache.set(file, targets)
  }
  return targets
}

function readImports(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true)
  const targets: string[] = []
  for (const { fileName: specifier } of importedFiles) {
    if (!specifier.startsWith('.')) continue
    const base = resolve(dirname(file), specifier)
    const candidates = [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')]
    const target = candidates.find((c) => c.endsWith('.ts') && existsSync(c))
    if (target === undefined) throw new Error(`${inRepo(file)}: cannot resolve import '${specifier}'`)
    targets.push(target)
  }
  return [...new Set(targets)]
}

/** Each layer's paths, with the row it stands in (0 at the top). */
const layers = LAYERS.flatMap((row, rank) => row.map((layer) => ({ layer, rank, paths: layer.split(' + ') })))

/** The layer of a file (path in core's src): the one whose path matches it longest. */
function layerOf(file: string): { layer: string; rank: number } | undefined {
  let best: { layer: string; rank: number; length: number } | undefined
  for (const { layer, rank, paths } of layers) {
    for (const path of paths) {
      const matches = path.endsWith('/') ? file.startsWith(path) : file === path
      if (matches && (best === undefined || path.length > best.length))
        best = { layer, rank, length: path.length }
    }
  }
  return best
}

describe('packages/core/src imports', () => {
  it('every file sits in a layer of LAYERS', () => {
    const homeless = sourcesUnder(coreSrc)
      .map(inCore)
      .filter((file) => layerOf(file) === undefined)
    expect(homeless, 'files in no layer: put them in a layer folder, or add the layer to LAYERS').toEqual([])
  })

  it('run one way down the layers: no import from a lower layer to a higher one, none sideways', () => {
    const wrong: string[] = []
    const seen = new Set<string>()
    for (const file of sourcesUnder(coreSrc)) {
      const from = layerOf(inCore(file))
      for (const target of importsOf(file)) {
        const to = layerOf(inCore(target))
        if (from === undefined || to === undefined || from.layer === to.layer || to.rank > from.rank) continue
        const edge = `${inCore(file)} → ${inCore(target)}`
        seen.add(edge)
        if (UPWARD_IMPORTS_ALLOWED.includes(edge)) continue
        const way = to.rank === from.rank ? 'sideways' : 'up'
        wrong.push(`${edge}: runs ${way}, from ${from.layer} to ${to.layer}`)
      }
    }
    for (const edge of UPWARD_IMPORTS_ALLOWED) {
      if (!seen.has(edge)) wrong.push(`${edge}: no longer imported; remove it from UPWARD_IMPORTS_ALLOWED`)
    }
    expect(wrong, 'imports against the layer order of LAYERS').toEqual([])
  })

  it('run in no circle', () => {
    const files = sourcesUnder(coreSrc)
    const graph = new Map(files.map((f) => [f, importsOf(f)]))
    // Tarjan's strongly connected components: a component of more than one file, or a file importing itself, is
    // a circle.
    let counter = 0
    const index = new Map<string, number>()
    const low = new Map<string, number>()
    const stack: string[] = []
    const onStack = new Set<string>()
    const circles: string[][] = []
    const visit = (file: string): void => {
      index.set(file, counter)
      low.set(file, counter)
      counter++
      stack.push(file)
      onStack.add(file)
      for (const next of graph.get(file) ?? []) {
        if (!index.has(next)) {
          visit(next)
          low.set(file, Math.min(low.get(file)!, low.get(next)!))
        } else if (onStack.has(next)) {
          low.set(file, Math.min(low.get(file)!, index.get(next)!))
        }
      }
      if (low.get(file) === index.get(file)) {
        const component: string[] = []
        let member: string
        do {
          member = stack.pop()!
          onStack.delete(member)
          component.push(inCore(member))
        } while (member !== file)
        if (component.length > 1 || graph.get(file)?.includes(file)) circles.push(component.sort())
      }
    }
    for (const file of files) if (!index.has(file)) visit(file)
    expect(circles, 'files that import one another in a circle').toEqual([])
  })
})

/** Lines of `node`, from its first token (after its comments) to its last. */
function linesOf(source: ts.SourceFile, node: ts.Node): number {
  const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line
  const end = source.getLineAndCharacterOfPosition(node.getEnd()).line
  return end - start + 1
}

/** A unit's name: its own, or the variable or property it is assigned to, after its enclosing units' names. */
function nameOf(node: ts.Node, source: ts.SourceFile): string {
  const named = node as { name?: ts.Node }
  if (ts.isConstructorDeclaration(node)) return 'constructor'
  if (named.name !== undefined) return named.name.getText(source)
  const parent = node.parent
  if (
    ts.isVariableDeclaration(parent) ||
    ts.isPropertyAssignment(parent) ||
    ts.isPropertyDeclaration(parent)
  ) {
    return parent.name.getText(source)
  }
  return '(anonymous)'
}

/** Every class and function of a file with its size, named `Outer.inner` (`Class.method`). */
function unitsOf(source: ts.SourceFile): { name: string; lines: number }[] {
  const units: { name: string; lines: number }[] = []
  const visit = (node: ts.Node, outer: string | undefined): void => {
    let inner = outer
    if (ts.isClassLike(node) || (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined)) {
      inner = outer === undefined ? nameOf(node, source) : `${outer}.${nameOf(node, source)}`
      units.push({ name: inner, lines: linesOf(source, node) })
    }
    ts.forEachChild(node, (child) => visit(child, inner))
  }
  visit(source, undefined)
  return units
}

/** The files over `MAX_FILE_LINES` and the units over `MAX_UNIT_LINES` under packages/*\/src, with their sizes. */
function oversize(): Map<string, number> {
  const measured = new Map<string, number>()
  for (const file of allSources) {
    const text = readFileSync(file, 'utf8')
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0)
    if (lines > MAX_FILE_LINES) measured.set(inRepo(file), lines)
    for (const unit of unitsOf(parse(file))) {
      if (unit.lines > MAX_UNIT_LINES) measured.set(`${inRepo(file)} ${unit.name}`, unit.lines)
    }
  }
  return measured
}

describe('source sizes', () => {
  it(`no file over ${MAX_FILE_LINES} lines, no class or function over ${MAX_UNIT_LINES} (but the known ones, not grown)`, () => {
    const measured = oversize()
    const problems: string[] = []
    for (const [unit, lines] of measured) {
      const known = KNOWN_OVERSIZE[unit]
      if (known === undefined) problems.push(`${unit}: ${lines} lines, over the limit; split it`)
      else if (lines > known)
        problems.push(`${unit}: grew from ${known} to ${lines} lines; split it, do not grow it`)
      else if (lines < known)
        problems.push(`${unit}: shrank from ${known} to ${lines} lines; lower its KNOWN_OVERSIZE entry`)
    }
    for (const unit of Object.keys(KNOWN_OVERSIZE)) {
      if (!measured.has(unit)) {
        problems.push(`${unit}: now within the limit (or gone); remove it from KNOWN_OVERSIZE in this test`)
      }
    }
    expect(problems).toEqual([])
  })
})
