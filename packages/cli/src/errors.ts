/** The CLI's exit codes and the error that carries one: what scripts can rely on (README, "Exit codes"). */

/** Exit codes, pinned by the tests. */
export const EXIT = {
  /** The command did what it was asked. */
  ok: 0,
  /** Anything else: a limiter or store error, a failed admin endpoint. */
  error: 1,
  /** The command line is wrong: an unknown command or option, a missing argument, a bad value. */
  usage: 2,
  /** What was asked for is not there: a limiter, a key's state, an override. */
  notFound: 3,
  /** Redis could not be reached (refused, timed out, no such host). */
  unreachable: 4,
} as const

export type ExitCode = (typeof EXIT)[keyof typeof EXIT]

/** Stable error codes of the CLI's own errors (`--json`: `{ "error": { "code", "message" } }`). */
export type CliErrorCode =
  | 'ERR_RATEWINDOW_CLI_USAGE'
  | 'ERR_RATEWINDOW_NOT_FOUND'
  | 'ERR_RATEWINDOW_REDIS_UNREACHABLE'
  | 'ERR_RATEWINDOW_CONFIG'
  | 'ERR_RATEWINDOW_ADMIN'

const EXIT_OF: Record<CliErrorCode, ExitCode> = {
  ERR_RATEWINDOW_CLI_USAGE: EXIT.usage,
  ERR_RATEWINDOW_NOT_FOUND: EXIT.notFound,
  ERR_RATEWINDOW_REDIS_UNREACHABLE: EXIT.unreachable,
  ERR_RATEWINDOW_CONFIG: EXIT.error,
  ERR_RATEWINDOW_ADMIN: EXIT.error,
}

/** An error the CLI reports as it is, with its exit code. */
export class CliError extends Error {
  readonly code: CliErrorCode
  readonly exitCode: ExitCode
  /** The command printed its result (which says what failed) before failing: `--json` prints no second document. */
  readonly printed: boolean

  constructor(code: CliErrorCode, message: string, options?: { cause?: unknown; printed?: boolean }) {
    super(message, options)
    this.name = 'CliError'
    this.code = code
    this.exitCode = EXIT_OF[code]
    this.printed = options?.printed === true
  }
}

export const usage = (message: string): CliError => new CliError('ERR_RATEWINDOW_CLI_USAGE', message)
export const notFound = (message: string): CliError => new CliError('ERR_RATEWINDOW_NOT_FOUND', message)

/** What any error thrown by a command reports: its code, message and exit code. */
export function describeFailure(error: unknown): {
  code: string
  message: string
  exitCode: ExitCode
  printed: boolean
} {
  if (error instanceof CliError)
    return { code: error.code, message: error.message, exitCode: error.exitCode, printed: error.printed }
  const coded = error as { code?: unknown; message?: unknown } | null
  const code = typeof coded?.code === 'string' ? coded.code : 'ERR_RATEWINDOW_CLI'
  const message = typeof coded?.message === 'string' ? coded.message : String(error)
  // A limiter's invalid or unknown option, or invalid key, is the command line's fault (the values came from it;
  // a config's errors are CliErrors).
  const exitCode = /^ERR_RATEWINDOW_(INVALID_|UNKNOWN_OPTION$)/.test(code) ? EXIT.usage : EXIT.error
  return { code, message, exitCode, printed: false }
}
