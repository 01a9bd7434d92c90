/**
 * The public surface of every package, as built (`pnpm check:surface`, after `pnpm build`; part of `pnpm test:all`).
 *
 * Reads each package's built declarations through its `exports` map (every subpath, ESM `.d.ts` and CJS `.d.cts`)
 * with the TypeScript compiler and lists, one line each:
 * - every exported name with its kind (`class`, `function`, `const`, `type` for interfaces and type aliases, …);
 *   a name another of our packages declares is marked `(from @ratewindow/…)`, its members listed there only;
 * - the public members of exported classes (instance and `static`), interfaces, object type aliases and object
 *   constants (the `*_DEFAULTS`), including members inherited from our own packages, call (`Name()`) and index
 *   (`Name[]`) signatures; names only, no types, so a harmless change in how a type prints changes nothing;
 * - the members that `declare global` / `declare module '…'` blocks add to other packages' interfaces.
 * Private members, `#private` fields and anything tagged `@internal` stay out.
 *
 * The lines are compared with test/surface/<package>.txt: a line missing from the build fails, naming it;
 * added lines are reported and allowed. `--update` rewrites the snapshots (review the diff before committing).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const packagesDir = join(root, 'packages')
const snapshotDir = join(root, 'test/surface')
const update = process.argv.includes('--update')

interface Entry {
  /** The `exports` subpath, e.g. `.` or `./throttler`. */
  subpath: string
  esm: string
  cjs: string
}

interface Package {
  name: string
  /** Directory name under packages/. */
  dir: string
  entries: Entry[]
}

type Format = 'esm' | 'cjs'

/** The `types` file of `condition` (`import` or `require`) under one `exports` subpath. */
function typesOf(target: unknown, condition: 'import' | 'require', where: string): string {
  const branch = (target as Record<string, { types?: string } | undefined>)[condition]
  if (typeof branch?.types !== 'string') throw new Error(`${where}: no \`${condition}.types\` in exports`)
  return branch.types
}

function readPackages(): Package[] {
  return readdirSync(packagesDir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(packagesDir, d.name, 'package.json')))
    .map((d) => {
      const manifest = JSON.parse(readFileSync(join(packagesDir, d.name, 'package.json'), 'utf8')) as {
        name: string
        private?: boolean
        exports?: Record<string, unknown>
      }
      const entries = Object.entries(manifest.exports ?? {})
        .filter(([subpath]) => subpath !== './package.json')
        .map(([subpath, target]) => {
          const where = `${manifest.name} "${subpath}"`
          const dir = join(packagesDir, d.name)
          return {
            subpath,
            esm: join(dir, typesOf(target, 'import', where)),
            cjs: join(dir, typesOf(target, 'require', where)),
          }
        })
      return { name: manifest.name, dir: d.name, entries }
    })
    .filter((p) => p.entries.length > 0)
    .sort((a, b) => compare(a.dir, b.dir))
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** The package directory (under packages/) a declaration file belongs to, if it is one of ours. */
function ownerOf(fileName: string): string | undefined {
  const path = relative(packagesDir, fileName)
  if (path.startsWith('..')) return undefined
  return path.split(/[\\/]/)[0]
}

function isInternal(declaration: ts.Node): boolean {
  return ts.getJSDocTags(declaration).some((tag) => tag.tagName.text === 'internal')
}

function isPrivate(symbol: ts.Symbol): boolean {
  if (symbol.escapedName.toString().startsWith('__#') || symbol.name.startsWith('#')) return true
  return (symbol.declarations ?? []).some(
    (d) => (ts.getCombinedModifierFlags(d as ts.Declaration) & ts.ModifierFlags.Private) !== 0,
  )
}

/** Declared in one of our packages, and public. */
function isOurPublic(symbol: ts.Symbol): boolean {
  const declarations = symbol.declarations ?? []
  if (declarations.length === 0) return false
  if (!declarations.some((d) => ownerOf(d.getSourceFile().fileName) !== undefined)) return false
  return !isPrivate(symbol) && !declarations.some(isInternal)
}

function kindOf(symbol: ts.Symbol): string {
  const f = symbol.flags
  const kinds: string[] = []
  if (f & ts.SymbolFlags.Class) kinds.push('class')
  if (f & ts.SymbolFlags.Enum) kinds.push('enum')
  if (f & ts.SymbolFlags.Function) kinds.push('function')
  if (f & ts.SymbolFlags.Variable) kinds.push('const')
  if (f & (ts.SymbolFlags.ValueModule | ts.SymbolFlags.NamespaceModule)) kinds.push('namespace')
  if (!(f & ts.SymbolFlags.Class) && f & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias))
    kinds.push('type')
  return kinds.length > 0 ? kinds.join('+') : 'unknown'
}

/** Member lines of a type: its properties, call and index signatures declared in our packages. */
function membersOf(checker: ts.TypeChecker, type: ts.Type, prefix: string): string[] {
  const lines = checker
    .getPropertiesOfType(type)
    .filter(isOurPublic)
    .map((p) => `${prefix}.${p.name}`)
  const ours = (s: { declaration?: ts.Node | undefined }) =>
    s.declaration !== undefined && ownerOf(s.declaration.getSourceFile().fileName) !== undefined
  if (checker.getSignaturesOfType(type, ts.SignatureKind.Call).some((s) => ours(s))) lines.push(`${prefix}()`)
  if (checker.getSignaturesOfType(type, ts.SignatureKind.Construct).some((s) => ours(s))) {
    lines.push(`new ${prefix}()`)
  }
  for (const info of checker.getIndexInfosOfType(type)) {
    if (ours(info)) lines.push(`${prefix}[${checker.typeToString(info.keyType)}]`)
  }
  return lines
}

function isObjectLike(type: ts.Type): boolean {
  if (type.isUnion()) return type.types.every(isObjectLike)
  return (type.flags & (ts.TypeFlags.Object | ts.TypeFlags.Intersection)) !== 0
}

/** Lines for one exported symbol: `kind name`, then its members indented. */
function describeExport(checker: ts.TypeChecker, exported: ts.Symbol, self: string): string[] {
  const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
  const name = exported.name
  const declarations = symbol.declarations ?? []
  const owners = new Set(declarations.map((d) => ownerOf(d.getSourceFile().fileName)))
  const kind = kindOf(symbol)
  if (!owners.has(self)) {
    const from = [...owners].map((o) => (o === undefined ? 'a dependency' : packageName(o))).join(', ')
    return [`${kind} ${name} (from ${from})`]
  }
  const members: string[] = []
  const f = symbol.flags
  if (f & ts.SymbolFlags.Class) {
    members.push(...membersOf(checker, checker.getDeclaredTypeOfSymbol(symbol), name))
    const statics = checker.getPropertiesOfType(checker.getTypeOfSymbol(symbol))
    for (const s of statics) {
      if (s.name !== 'prototype' && isOurPublic(s)) members.push(`static ${name}.${s.name}`)
    }
  } else if (f & ts.SymbolFlags.Enum) {
    for (const s of checker.getExportsOfModule(symbol)) members.push(`${name}.${s.name}`)
  } else if (f & (ts.SymbolFlags.ValueModule | ts.SymbolFlags.NamespaceModule)) {
    for (const s of checker.getExportsOfModule(symbol)) members.push(`${name}.${s.name}`)
  } else if (f & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) {
    const type = checker.getDeclaredTypeOfSymbol(symbol)
    if (f & ts.SymbolFlags.Interface || isObjectLike(type)) members.push(...membersOf(checker, type, name))
  } else if (f & ts.SymbolFlags.Variable) {
    // Object constants declared with a type literal (`declare const HTTP_DEFAULTS: { readonly … }`).
    const declaration = declarations.find(ts.isVariableDeclaration)
    if (declaration?.type !== undefined && ts.isTypeLiteralNode(declaration.type)) {
      members.push(...membersOf(checker, checker.getTypeOfSymbol(symbol), name))
    }
  }
  return [`${kind} ${name}`, ...[...new Set(members)].sort(compare).map((m) => `  ${m}`)]
}

/** Members that `declare global` and `declare module '…'` blocks of the entry file add to other interfaces. */
function describeAugmentations(file: ts.SourceFile): string[] {
  const lines: string[] = []
  const walk = (node: ts.Node, target: string, path: string[]): void => {
    if (ts.isModuleDeclaration(node)) {
      const inner = node.body
      const name = node.name.text
      if (inner === undefined) return
      if (ts.isModuleBlock(inner)) for (const s of inner.statements) walk(s, target, [...path, name])
      else walk(inner, target, [...path, name])
    } else if (ts.isInterfaceDeclaration(node)) {
      const owner = [...path, node.name.text].join('.')
      for (const member of node.members) {
        if (isInternal(member)) continue
        const memberName = member.name !== undefined ? member.name.getText(file) : '()'
        lines.push(`augment ${target} ${owner}.${memberName}`)
      }
    }
  }
  for (const statement of file.statements) {
    if (!ts.isModuleDeclaration(statement)) continue
    const isGlobal = (statement.flags & ts.NodeFlags.GlobalAugmentation) !== 0
    const target = isGlobal ? 'global' : `'${statement.name.text}'`
    const body = statement.body
    if (body !== undefined && ts.isModuleBlock(body)) for (const s of body.statements) walk(s, target, [])
  }
  return [...new Set(lines)].sort(compare)
}

let packageNames: Map<string, string> | undefined
function packageName(dir: string): string {
  packageNames ??= new Map(readPackages().map((p) => [p.dir, p.name]))
  return packageNames.get(dir) ?? dir
}

/** The surface of every entry in one format, keyed by package directory: lines with `[subpath]` headers. */
function surfaces(packages: Package[], format: Format): Map<string, string[]> {
  const files = packages.flatMap((p) => p.entries.map((e) => e[format]))
  for (const file of files) {
    if (!existsSync(file)) throw new Error(`${relative(root, file)} is missing: run \`pnpm build\` first`)
  }
  const program = ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2023.d.ts'],
    types: ['node'],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    experimentalDecorators: true,
  })
  const checker = program.getTypeChecker()
  const result = new Map<string, string[]>()
  for (const p of packages) {
    const lines: string[] = []
    for (const entry of p.entries) {
      const file = program.getSourceFile(realpathSync(entry[format]))
      const module = file && checker.getSymbolAtLocation(file)
      if (file === undefined || module === undefined) throw new Error(`cannot read ${entry[format]}`)
      lines.push(`[${entry.subpath}]`)
      const exports = checker.getExportsOfModule(module).sort((a, b) => compare(a.name, b.name))
      for (const exported of exports) lines.push(...describeExport(checker, exported, p.dir))
      lines.push(...describeAugmentations(file))
    }
    result.set(p.dir, lines)
  }
  return result
}

/** Items of a surface: each line, qualified by its subpath past the first (`./throttler class …`). */
function items(lines: string[]): string[] {
  let subpath = '.'
  const out: string[] = []
  for (const line of lines) {
    if (line.startsWith('#') || line.trim() === '') continue
    const header = /^\[(.+)\]$/.exec(line)
    if (header) subpath = header[1]!
    else out.push(subpath === '.' ? line.trim() : `${subpath} ${line.trim()}`)
  }
  return out
}

function snapshotPath(p: Package): string {
  return join(snapshotDir, `${p.dir}.txt`)
}

function header(p: Package): string {
  return (
    `# ${p.name}: public surface of the built declarations (ESM and CJS), one name or member a line.\n` +
    '# Written by `pnpm check:surface --update` (scripts/check-surface.ts); a line that disappears fails the check.\n'
  )
}

function main(): number {
  const packages = readPackages()
  const built = { esm: surfaces(packages, 'esm'), cjs: surfaces(packages, 'cjs') }
  let failed = false
  let total = 0
  for (const p of packages) {
    const esm = built.esm.get(p.dir)!
    const cjs = built.cjs.get(p.dir)!
    const esmItems = items(esm)
    const cjsItems = new Set(items(cjs))
    total += esmItems.length
    if (update) {
      const differ = esmItems
        .filter((i) => !cjsItems.has(i))
        .concat([...cjsItems].filter((i) => !esmItems.includes(i)))
      if (differ.length > 0) {
        console.error(`${p.name}: ESM and CJS declarations differ, not written:\n  ${differ.join('\n  ')}`)
        failed = true
        continue
      }
      mkdirSync(snapshotDir, { recursive: true })
      writeFileSync(snapshotPath(p), header(p) + esm.join('\n') + '\n')
      continue
    }
    if (!existsSync(snapshotPath(p))) {
      console.error(
        `${p.name}: no snapshot at ${relative(root, snapshotPath(p))}; run \`pnpm check:surface --update\``,
      )
      failed = true
      continue
    }
    const recorded = items(readFileSync(snapshotPath(p), 'utf8').split('\n'))
    const recordedSet = new Set(recorded)
    for (const [format, built] of [
      ['ESM', new Set(esmItems)],
      ['CJS', cjsItems],
    ] as const) {
      const lost = recorded.filter((i) => !built.has(i))
      if (lost.length > 0) {
        failed = true
        console.error(`✗ ${p.name} (${format}): ${lost.length} lost from the public surface:`)
        for (const item of lost) console.error(`    ${item}`)
      }
      const added = [...built].filter((i) => !recordedSet.has(i))
      if (added.length > 0) {
        console.log(`+ ${p.name} (${format}): ${added.length} added (allowed; \`--update\` records them):`)
        for (const item of added) console.log(`    ${item}`)
      }
    }
  }
  const what = update ? 'written' : 'checked'
  console.log(`public surface ${what}: ${total} names and members in ${packages.length} packages`)
  if (failed && !update) {
    console.error(
      'A name or member above is gone from the built declarations. Put it back, or, if the loss is on purpose ' +
        '(a later issue says so), run `pnpm check:surface --update` and commit the snapshot with the reason.',
    )
  }
  return failed ? 1 : 0
}

process.exitCode = main()
