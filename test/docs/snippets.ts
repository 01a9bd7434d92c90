/**
 * Code blocks of the Markdown docs, and the `<!-- check: … -->` annotations that say how CI checks them.
 * The conventions are documented in CONTRIBUTING.md ("Docs that run"); `snippets.test.ts` runs the checks.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

export const root = resolve(import.meta.dirname, '../..')

/** One request of a `serve` check and the status it must get. */
export interface Step {
  method: string
  path: string
  times: number
  status: number
  /** Headers every response of the step must carry (`→ 429 with Retry-After, RateLimit-Policy`). */
  headers: string[]
}

export interface ServeCheck {
  /** Where the annotation stands, `file:line`. */
  at: string
  /** The program to start: a snippet's extracted file, or a file named in the annotation. */
  file?: string
  /** Start a redis-server for it and pass its address as REDIS_URL. */
  redis: boolean
  steps: Step[]
}

export interface Snippet {
  /** `path/to/doc.md:line` of the block's first code line. */
  at: string
  doc: string
  /** 1-based line of the block's first code line in the doc. */
  line: number
  lang: string
  code: string
  skip?: string
  prelude: string
  run: boolean
  serve?: ServeCheck
}

/**
 * Every doc whose code blocks are checked: README.md, packages/* /README.md, docs/*.md, docs/from/*.md (the guides
 * from the peer libraries), examples/* /README.md.
 */
export function docFiles(): string[] {
  const inDir = (dir: string, pick: (name: string) => boolean) =>
    readdirSync(join(root, dir))
      .filter(pick)
      .map((name) => join(dir, name))
  const readmes = (dir: string) =>
    readdirSync(join(root, dir), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(dir, entry.name, 'README.md'))
      .filter((file) => {
        try {
          readFileSync(join(root, file))
          return true
        } catch {
          return false
        }
      })
  return [
    'README.md',
    ...readmes('packages'),
    ...inDir('docs', (name) => name.endsWith('.md')),
    ...inDir('docs/from', (name) => name.endsWith('.md')),
    ...readmes('examples'),
  ]
}

const STEP =
  /^(GET|HEAD|POST|PUT|PATCH|DELETE)\s+(\S+)(?:\s*[×x]\s*(\d+))?\s*(?:→|->)\s*(\d{3})(?:\s+with\s+(.+))?$/

export function parseSteps(text: string, at: string): Step[] {
  return text.split(';').map((part) => {
    const match = STEP.exec(part.trim())
    if (!match)
      throw new Error(`${at}: cannot read the request "${part.trim()}" (write e.g. "GET / ×3 → 200")`)
    return {
      method: match[1]!,
      path: match[2]!,
      times: Number(match[3] ?? 1),
      status: Number(match[4]),
      headers: (match[5] ?? '')
        .split(',')
        .map((name) => name.trim())
        .filter(Boolean),
    }
  })
}

function parseServe(body: string, doc: string, at: string): ServeCheck {
  const colon = body.indexOf(':')
  if (colon < 0) throw new Error(`${at}: a serve check reads "serve [FILE] [with redis]: STEPS"`)
  const head = body.slice(0, colon).trim().split(/\s+/).filter(Boolean)
  const redis = head.join(' ').endsWith('with redis')
  const words = redis ? head.slice(0, -2) : head
  if (words.length > 1) throw new Error(`${at}: unexpected words "${words.join(' ')}" in a serve check`)
  return {
    at,
    file: words[0] === undefined ? undefined : join(dirname(join(root, doc)), words[0]),
    redis,
    steps: parseSteps(body.slice(colon + 1), at),
  }
}

export interface DocChecks {
  snippets: Snippet[]
  /** Serve checks that name a file rather than annotate a block (examples). */
  serves: ServeCheck[]
}

/** Reads the code blocks of one doc with the annotations directly above each. */
export function parseDoc(doc: string): DocChecks {
  const lines = readFileSync(join(root, doc), 'utf8').split('\n')
  const snippets: Snippet[] = []
  const serves: ServeCheck[] = []
  let pending: { kind: string; body: string; at: string }[] = []
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const annotation = /^<!--\s*check:\s*(\w+)([\s\S]*)$/.exec(line)
    if (annotation) {
      const at = `${doc}:${i + 1}`
      let body = annotation[2]!
      while (!body.includes('-->')) {
        i++
        if (i >= lines.length) throw new Error(`${at}: annotation without its closing -->`)
        body += `\n${lines[i]}`
      }
      body = body.slice(0, body.lastIndexOf('-->'))
      const kind = annotation[1]!
      if (!['skip', 'prelude', 'run', 'serve'].includes(kind))
        throw new Error(`${at}: unknown check "${kind}" (skip, prelude, run or serve)`)
      if (kind === 'serve' && /^\s*\S+(\s+with redis)?\s*:/.test(body) && !/^\s*:/.test(body)) {
        serves.push(parseServe(body, doc, at))
      } else {
        pending.push({ kind, body, at })
      }
      continue
    }
    const fence = /^```(\w*)\s*$/.exec(line)
    if (!fence) {
      if (pending.length > 0 && line.trim() !== '')
        throw new Error(`${pending[0]!.at}: a check annotation must stand directly above its code block`)
      continue
    }
    const start = i + 1
    let end = start
    while (end < lines.length && !/^```\s*$/.test(lines[end]!)) end++
    if (end >= lines.length) throw new Error(`${doc}:${i + 1}: code block never closed`)
    const at = `${doc}:${start + 1}`
    const snippet: Snippet = {
      at,
      doc,
      line: start + 1,
      lang: fence[1]!,
      code: lines.slice(start, end).join('\n'),
      prelude: '',
      run: false,
    }
    for (const { kind, body, at: where } of pending) {
      if (kind === 'skip') snippet.skip = body.trim() || 'no reason given'
      else if (kind === 'prelude') snippet.prelude += `${body.trim()}\n`
      else if (kind === 'run') snippet.run = true
      else snippet.serve = parseServe(body.replace(/^\s*:/, ':'), doc, where)
    }
    if (snippet.skip && !/\S{3}/.test(snippet.skip)) throw new Error(`${at}: a skip needs a reason`)
    pending = []
    snippets.push(snippet)
    i = end
  }
  return { snippets, serves }
}

export function allDocChecks(): DocChecks {
  const all: DocChecks = { snippets: [], serves: [] }
  for (const doc of docFiles()) {
    const { snippets, serves } = parseDoc(doc)
    all.snippets.push(...snippets)
    all.serves.push(...serves)
  }
  return all
}

export const TYPESCRIPT = new Set(['ts', 'typescript', 'js', 'javascript'])

/** A file name for a snippet's extracted module, unique per doc and line. */
export function moduleName(snippet: Snippet): string {
  return `${snippet.doc.replace(/[^A-Za-z0-9]+/g, '_')}_L${snippet.line}`
}

/** The module a block typechecks as: its prelude, then the block, then `export {}` (a module of its own). */
export function moduleSource(snippet: Snippet): { source: string; preludeLines: number } {
  const prelude = snippet.prelude
  const preludeLines = prelude === '' ? 0 : prelude.split('\n').length - 1
  return { source: `${prelude}${snippet.code}\nexport {}\n`, preludeLines }
}

const LITERAL = String.raw`'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null`
const SHOWN_VALUE = new RegExp(String.raw`^(\s*)([^/]+?)\s*//\s*(${LITERAL})(?:\s.*)?$`)
const SHOWN_OBJECT = /^\s*\/\/\s*(\{.*\})/

/**
 * The block as it runs under `run`: the values its comments show become assertions.
 * - `expression // 'value'` (a string, number, boolean or null literal first in the comment): the expression
 *   equals the value.
 * - a comment line `// { field: value, … }` right below `const name = …`: `name` has those fields (`...` stands
 *   for the fields not shown).
 */
export function runnableSource(snippet: Snippet): { source: string; assertions: number } {
  const { source: module, preludeLines } = moduleSource(snippet)
  const lines = module.split('\n')
  let assertions = 0
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const value = SHOWN_VALUE.exec(line)
    if (value && !/^(const|let|var|import|export|return|if|for|while)\b/.test(value[2]!.trim())) {
      lines[i] =
        `${value[1]}__shows(${JSON.stringify(`${snippet.doc}:${snippet.line + i - preludeLines}`)}, ${value[2]}, ${value[3]})`
      assertions++
      continue
    }
    const object = SHOWN_OBJECT.exec(line)
    const declared = /^\s*(?:const|let)\s+(\w+)\s*=/.exec(lines[i - 1] ?? '')
    if (object && declared) {
      const fields = object[1]!.replace(/,?\s*\.\.\.\s*/g, ' ')
      lines[i] = `__has(${JSON.stringify(declared[1])}, ${declared[1]}, ${fields})`
      assertions++
    }
  }
  const helpers = `
function __shows(where: string, actual: unknown, expected: unknown): void {
  if (!Object.is(actual, expected))
    throw new Error(\`\${where}: the doc shows \${JSON.stringify(expected)}, the code gives \${JSON.stringify(actual)}\`)
}
function __has(name: string, actual: any, expected: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(expected)) {
    if (!Object.is(actual?.[field], value))
      throw new Error(\`the doc shows \${name}.\${field} = \${JSON.stringify(value)}, the code gives \${JSON.stringify(actual?.[field])}\`)
  }
}
`
  return { source: `${lines.join('\n')}${helpers}`, assertions }
}

/** `pnpm <script>` commands in a shell line, as [package or undefined for the root, script]. */
export function pnpmScripts(command: string): [string | undefined, string][] {
  const BUILTIN = new Set([
    'install',
    'i',
    'add',
    'remove',
    'exec',
    'dlx',
    'why',
    'list',
    'ls',
    'pack',
    'publish',
    'update',
    'store',
    'create',
    'init',
    'outdated',
    'audit',
  ])
  const found: [string | undefined, string][] = []
  for (const segment of command.replace(/#.*$/, '').split(/&&|\|\||[;|&]/)) {
    const words = segment
      .trim()
      .split(/\s+/)
      .filter((word) => !/^[A-Z_]+=/.test(word))
    if (words[0] !== 'pnpm') continue
    let filter: string | undefined
    let k = 1
    while (k < words.length && words[k]!.startsWith('-')) {
      if (words[k] === '--filter' || words[k] === '-F') {
        filter = words[k + 1]
        k += 2
      } else k++
    }
    let script = words[k]
    if (script === 'run') script = words[k + 1]
    if (script === undefined || BUILTIN.has(script)) continue
    found.push([filter, script])
  }
  return found
}

/** The scripts of the root package and of every workspace package, by package name. */
export function workspaceScripts(): Map<string | undefined, Set<string>> {
  const scripts = new Map<string | undefined, Set<string>>()
  const read = (dir: string) => JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'))
  const rootManifest = read('.')
  scripts.set(undefined, new Set(Object.keys(rootManifest.scripts ?? {})))
  for (const parent of ['packages', 'examples', '.']) {
    for (const entry of readdirSync(join(root, parent), { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name === 'node_modules' || entry.name.startsWith('.')) continue
      try {
        const manifest = read(join(parent, entry.name))
        scripts.set(manifest.name, new Set(Object.keys(manifest.scripts ?? {})))
      } catch {}
    }
  }
  return scripts
}

export function relativeToRoot(file: string): string {
  return relative(root, file)
}
