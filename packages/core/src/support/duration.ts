import { invalid } from './errors.js'

/**
 * A duration: whole milliseconds (a number, or a string of digits such as `'60000'`, as environment variables
 * hold them), or a number with a unit as users write it: `'500ms'`, `'30s'`, `'1m'`, `'1.5h'`, `'1d'`,
 * `'30 seconds'`, `'15 minutes'`, `'1 hour'`. The result must be a whole number of ms > 0.
 */
export type Duration =
  | number
  | `${number}`
  | `${number}${DurationUnit}`
  | `${number} ${DurationUnit | DurationWord}`
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd'
/** Unit words, singular or plural. */
export type DurationWord =
  | 'millisecond'
  | 'milliseconds'
  | 'second'
  | 'seconds'
  | 'minute'
  | 'minutes'
  | 'hour'
  | 'hours'
  | 'day'
  | 'days'

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const WORD_UNIT: Record<string, DurationUnit> = {
  millisecond: 'ms',
  second: 's',
  minute: 'm',
  hour: 'h',
  day: 'd',
}
const DURATION_PATTERN =
  /^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?) ?(ms|s|m|h|d|(millisecond|second|minute|hour|day)s?)$/
const ALLOWED =
  "a positive whole number of milliseconds (a number, or digits such as '60000') or a string like '500ms', '30s', '1m', '15 minutes', '1h', '1d'"

/**
 * Parses a duration into whole milliseconds. Throws a `RateLimitError` naming `option` when the value is
 * not a positive whole number of milliseconds (no silent rounding of `1.5` or `'1x'`).
 */
export function parseDuration(value: unknown, option: string): number {
  let ms: number | undefined
  if (typeof value === 'number') ms = value
  else if (typeof value === 'string') {
    // Digits alone are milliseconds, as an environment variable or a configuration file gives them.
    const digits = value.trim()
    if (/^\d+$/.test(digits)) ms = Number(digits)
    const match = DURATION_PATTERN.exec(value.trim())
    if (ms === undefined && match)
      ms = Number(match[1]) * UNIT_MS[match[3] ? WORD_UNIT[match[3]]! : (match[2] as DurationUnit)]
  }
  if (ms === undefined || !Number.isSafeInteger(ms) || ms <= 0) {
    throw invalid('ERR_RATEWINDOW_INVALID_WINDOW', option, value, ALLOWED)
  }
  return ms
}

/** The longest delay a Node timer honours: longer ones fire after 1 ms (with a TimeoutOverflowWarning). */
export const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * Parses a duration that drives a timer (`timeout`, `sweepInterval`). Throws a `RateLimitError` naming
 * `option` past `MAX_TIMER_MS` (about 24.8 days): Node would fire such a timer at once, turning a 25-day
 * timeout into an immediate one.
 */
export function parseTimerDuration(value: unknown, option: string): number {
  const ms = parseDuration(value, option)
  if (ms > MAX_TIMER_MS) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_WINDOW',
      option,
      value,
      `at most ${MAX_TIMER_MS} ms (about 24.8 days), the longest delay a Node timer can wait`,
    )
  }
  return ms
}

/** Formats milliseconds in the largest unit that divides them: 60000 → '1m', 1500 → '1500ms'. */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`
  }
  return `${ms}ms`
}
