/** `ratewindow <command>`: the command line read, Redis connected, the command run, the result printed. */
import type { RateLimiter } from '@ratewindow/core'
import { type Command, type GlobalOptions, parseCommandLine } from './args.js'
import { act, inspect } from './commands/keys.js'
import { limiters, top } from './commands/scanned.js'
import { watch } from './commands/watch.js'
import { loadLimiters, selectLimiters } from './config.js'
import { describeFailure, EXIT, type ExitCode, notFound, usage } from './errors.js'
import { hasHelp, helpText } from './help.js'
import { connect } from './redis.js'
import { type Output, printable } from './render.js'

/** Where `run` reads and writes: the process's by default; tests and embedders pass their own. */
export interface RunContext {
  env?: Readonly<Record<string, string | undefined>>
  stdout?: (text: string) => void
  stderr?: (text: string) => void
  /** Whether stderr is a terminal: progress lines are drawn there only. */
  interactive?: boolean
  /** Whether stdout is a terminal: `watch` clears the screen there only. */
  screen?: boolean
  /** Ends `watch` (without `--once`). */
  signal?: AbortSignal
  /** What `--version` prints (the bin passes its package's version). */
  version?: string
}

/** Runs one command line; resolves its exit code (never rejects). */
export async function run(argv: readonly string[], context: RunContext = {}): Promise<ExitCode> {
  const output: Output = {
    print: (text) => (context.stdout ?? ((line) => process.stdout.write(line)))(`${text}\n`),
    note: (text) => (context.stderr ?? ((line) => process.stderr.write(line)))(text),
    interactive: context.interactive ?? process.stderr.isTTY === true,
    screen: context.screen ?? process.stdout.isTTY === true,
  }
  let json = argv.includes('--json')
  try {
    const { command, options } = parseCommandLine(argv, context.env ?? process.env)
    json = options.json
    if (command.name === 'help') {
      if (command.topic !== undefined && !hasHelp(command.topic))
        throw usage(`Unknown command ${JSON.stringify(command.topic)}. See \`ratewindow --help\`.`)
      output.print(helpText(command.topic))
      return EXIT.ok
    }
    if (command.name === 'version') {
      const version = context.version ?? 'unknown'
      output.print(json ? JSON.stringify({ version }, null, 2) : `ratewindow ${version}`)
      return EXIT.ok
    }
    const result = await runCommand(command, options, output, context.signal)
    if (json && command.name !== 'watch') output.print(JSON.stringify(result, null, 2))
    return EXIT.ok
  } catch (error) {
    const failure = describeFailure(error)
    if (json && failure.printed) return failure.exitCode
    if (json)
      output.print(JSON.stringify({ error: { code: failure.code, message: failure.message } }, null, 2))
    else output.note(`ratewindow: ${printable(failure.message)}\n`)
    return failure.exitCode
  }
}

async function runCommand(
  command: Exclude<Command, { name: 'help' | 'version' }>,
  options: GlobalOptions,
  output: Output,
  signal: AbortSignal | undefined,
): Promise<unknown> {
  const connection = await connect(options.redis, options)
  try {
    const configured: RateLimiter[] | undefined =
      options.config === undefined
        ? undefined
        : await loadLimiters(options.config, connection.store, options.configTimeoutMs)
    try {
      if (options.limiter !== undefined) knownLimiter(options.limiter, configured)
      switch (command.name) {
        case 'limiters':
          return await limiters(connection, options, configured ?? [], output)
        case 'top':
          return await top(connection, options, configured ?? [], output)
        case 'watch':
          return await watch(connection, options, command, configured ?? [], output, signal)
        case 'inspect':
          return await inspect(connection, options, configured, command, output)
        default:
          return await act(command, options, configured, output)
      }
    } finally {
      for (const limiter of configured ?? []) limiter.release()
    }
  } finally {
    await connection.close()
  }
}

/**
 * `--limiter` names a limiter of the config (by name or namespace) or a namespace (`limiters` prints them: they end
 * with `:`); anything else is not found (exit 3) before any scan.
 */
function knownLimiter(wanted: string, configured: readonly RateLimiter[] | undefined): void {
  if (wanted.endsWith(':')) return
  if (configured !== undefined) {
    selectLimiters(configured, wanted, true)
    return
  }
  throw notFound(
    `No limiter ${JSON.stringify(wanted)}: without \`--config\`, \`--limiter\` takes a namespace as \`ratewindow limiters\` prints it (e.g. rw:fw60000x100:).`,
  )
}
