/**
 * Every stable error code, each with its fix in docs/errors.md (a test keeps the two equal). Match on
 * `error.code`, never on the message text.
 */
export const ERROR_CODES = [
  'ERR_RATEWINDOW_INVALID_OPTION',
  'ERR_RATEWINDOW_UNKNOWN_OPTION',
  'ERR_RATEWINDOW_INVALID_LIMIT',
  'ERR_RATEWINDOW_INVALID_WINDOW',
  'ERR_RATEWINDOW_INVALID_ALGORITHM',
  'ERR_RATEWINDOW_INVALID_COST',
  'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
  'ERR_RATEWINDOW_DUPLICATE_RULE',
  'ERR_RATEWINDOW_SHARED_COUNTER',
  'ERR_RATEWINDOW_INVALID_KEY',
  'ERR_RATEWINDOW_INVALID_IP',
  'ERR_RATEWINDOW_STORE',
  'ERR_RATEWINDOW_STORE_TIMEOUT',
  'ERR_RATEWINDOW_SHED',
  'ERR_RATEWINDOW_WAIT_EXCEEDED',
  'ERR_RATEWINDOW_UNKNOWN_LIMITER',
  'ERR_RATEWINDOW_NO_CONNECTION_INFO',
  'ERR_RATEWINDOW_OVERRIDES_OFF',
  'ERR_RATEWINDOW_UNKNOWN_PLAN',
] as const

/** Stable error codes. Match on `error.code`, never on the message text. */
export type RateLimitErrorCode = (typeof ERROR_CODES)[number]

/** Where each code and warning is explained, with its fix: docs/errors.md. */
const ERRORS_PAGE = 'https://github.com/ratewindow/ratewindow/blob/main/docs/errors.md'

/**
 * The link to the explanation of `code` (an error's or a warning's): its own anchor in docs/errors.md, the code in
 * lower case with `-` for `_` (`ERR_RATEWINDOW_INVALID_OPTION` → `#err-ratewindow-invalid-option`).
 */
export function explanationOf(code: string): string {
  return `${ERRORS_PAGE}#${code.toLowerCase().replaceAll('_', '-')}`
}

/** `message` ended as a sentence, then the link to the explanation of `code`. */
export function withExplanation(message: string, code: string): string {
  return `${message}${/[.!?]$/.test(message) ? '' : '.'} See ${explanationOf(code)}`
}

/** Every error ratewindow throws on purpose is a `RateLimitError` with a stable `code`. */
export class RateLimitError extends Error {
  override readonly name = 'RateLimitError'
  readonly code: RateLimitErrorCode
  /** The option at fault, when there is one (for example `limit` or `rules[1].window`). */
  readonly option: string | undefined

  /** `message` ends with the link to this code's explanation and fix (docs/errors.md). */
  constructor(code: RateLimitErrorCode, message: string, options: { option?: string; cause?: unknown } = {}) {
    super(withExplanation(message, code), options.cause === undefined ? undefined : { cause: options.cause })
    this.code = code
    this.option = options.option
  }
}

/** Renders a received value for an error message: short, typed, never a crash on odd input. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value
    return JSON.stringify(shown)
  }
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : String(value)
  if (typeof value === 'bigint') return `${value}n`
  if (value === null) return 'null'
  if (Array.isArray(value)) return `an array of ${value.length}`
  if (typeof value === 'function') return 'a function'
  if (typeof value === 'object') return 'an object'
  return String(value)
}

/** Builds the standard "`option` must be …, received …" error. */
export function invalid(
  code: RateLimitErrorCode,
  option: string,
  value: unknown,
  allowed: string,
): RateLimitError {
  return new RateLimitError(
    code,
    `\`${option}\` must be ${allowed}; received ${describeValue(value)}.${countHint(code, option, value)}`,
    { option },
  )
}

/**
 * A count given as text (`limit: process.env.LIMIT`): counts are not read from strings, so say what to write.
 * Durations accept digit strings themselves.
 */
function countHint(code: RateLimitErrorCode, option: string, value: unknown): string {
  if (code === 'ERR_RATEWINDOW_INVALID_WINDOW' || typeof value !== 'string') return ''
  if (!/^\s*[+-]?(\d+\.?\d*|\.\d+)\s*$/.test(value)) return ''
  const name = option.split('.').pop() ?? option
  return ` Numbers are not read from text: for a value from the environment write \`${name}: Number(process.env.${name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()})\`.`
}

/** Asserts that an options argument is an object, else throws naming `option` with an `example` of one. */
export function requireObject(value: unknown, option: string, example: string): asserts value is object {
  if (typeof value !== 'object' || value === null) {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, `an object like ${example}`)
  }
}
