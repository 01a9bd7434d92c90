/**
 * What the run reports: a `✓`/`✗` line per check as it ends, the time each step took (for `--timings`), and the
 * summary at the end.
 */

/**
 * Checks that fail today for a known reason, with what will fix them: reported, not counted as failures while
 * they fail; a known failure that passes fails the run, so that its entry is deleted.
 */
const KNOWN_FAILURES = new Map<string, string>()

/** What a step does, for the `--timings` table. */
export type Kind =
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

/** Runs `action`, keeping how long it took under `kind` for `--timings`. */
export async function timed<T>(kind: Kind, name: string, action: () => Promise<T>): Promise<T> {
  const start = performance.now()
  try {
    return await action()
  } finally {
    spans.push({ kind, name, start, end: performance.now() })
  }
}

/** What a failed action printed, or its message. */
export function detailOf(error: unknown): string {
  const e = error as { stdout?: string; stderr?: string; message?: string }
  return [e?.stdout, e?.stderr].filter(Boolean).join('\n').trim() || e?.message || String(error)
}

/** Records one check's outcome (`failure`: what it printed; none when it passed), KNOWN_FAILURES applied. */
export function report(name: string, failure?: string): void {
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
export async function step(kind: Kind, name: string, action: () => Promise<unknown>): Promise<boolean> {
  let failure: string | undefined
  try {
    await timed(kind, name, action)
  } catch (error) {
    failure = detailOf(error) || 'failed'
  }
  report(name, failure)
  return failure === undefined
}

/** When the run started, when the packing ended, and when the last check ended (performance.now() ms). */
export interface Times {
  started: number
  packed: number
  done: number
}

/**
 * The end of the run: how long packing and the rest took, the `--timings` table when asked, the count of passed and
 * failed checks, and the failed ones by name (then the exit code is 1). `kept`: the work directory `KEEP=1` kept.
 */
export function summarize(times: Times, options: { timings: boolean; kept?: string }): void {
  const failed = outcomes.filter((outcome) => !outcome.ok)
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
  const { started, packed, done } = times
  console.log(
    `\npack ${seconds(packed - started)}, installs and checks ${seconds(done - packed)}, total ${seconds(done - started)}`,
  )
  if (options.timings) printTimings(done - started)
  console.log(`package checks: ${outcomes.length - failed.length} passed, ${failed.length} failed`)
  if (options.kept !== undefined) console.log(`kept ${options.kept}`)
  if (failed.length > 0) {
    console.log(`failed:\n${failed.map((outcome) => `  ${outcome.name}`).join('\n')}`)
    process.exitCode = 1
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
