/**
 * The small checks options share, beside `rejectUnknownOptions` (option-names.ts) and `invalid` (errors.ts): each
 * throws the standard "`option` must be …; received …" error, so that one rule is written, and worded, once.
 */
import { describeValue, invalid, RateLimitError, type RateLimitErrorCode } from './errors.js'
import { isWellFormed } from './hash.js'

/**
 * A key prefix: a string without `{` or `}` (a brace would break the Redis Cluster hash tag of the keys), of at
 * most `maxLength` characters when given. The option is `prefix`.
 */
export function prefixOption(value: unknown, maxLength?: number): asserts value is string {
  if (
    typeof value !== 'string' ||
    (maxLength !== undefined && value.length > maxLength) ||
    /[{}]/.test(value)
  ) {
    const allowed =
      maxLength === undefined
        ? 'a string without `{` or `}`'
        : `a string of at most ${maxLength} characters without \`{\` or \`}\``
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'prefix', value, allowed)
  }
}

/** A client key given to a limiter's method: a string (the error names the argument `key`). */
export function keyArgument(key: unknown): asserts key is string {
  if (typeof key !== 'string') {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_KEY',
      `The key must be a string; received ${describeValue(key)}.`,
      {
        option: 'key',
      },
    )
  }
}

/**
 * The form in which a client key reaches a store, and the operator's calls name it: the key itself when it is
 * well-formed UTF-16 (every key a URL, a header or a UTF-8 text can carry), else the key with its backslashes
 * doubled and each lone surrogate written `\uHHHH` (`'user\uD800'` → `'user\\ud800'`, the way the CLI prints it).
 * Redis clients send a key as UTF-8, where a lone surrogate becomes U+FFFD: `'user\uD800'` and `'user\uFFFD'`
 * were one key in an override record, and an operator could not name the key the limiter used. One to one on
 * the keys that are not well-formed, and its own result on every key (the form, typed back, names the same key).
 */
export function wellFormedKey(key: string): string {
  if (isWellFormed(key)) return key
  return key.replace(LONE_SURROGATE_OR_BACKSLASH, (found) =>
    found === '\\' ? '\\\\' : `\\u${found.charCodeAt(0).toString(16)}`,
  )
}

/** A backslash, or a surrogate not in a pair (with the `u` flag a pair is one code point, outside this range). */
const LONE_SURROGATE_OR_BACKSLASH = /\\|[\ud800-\udfff]/gu

/** One of `choices`, written `'a' or 'b'` in the error. */
export function oneOf<T extends string>(
  value: unknown,
  option: string,
  choices: readonly T[],
): asserts value is T {
  if (!choices.includes(value as T)) {
    const quoted = choices.map((choice) => `'${choice}'`)
    const allowed =
      quoted.length === 1 ? quoted[0]! : `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, allowed)
  }
}

/** Undefined, or a string of at most `maxLength` characters (a block's `reason`, an operator's `actor`). */
export function optionalText(value: unknown, option: string, maxLength: number): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || value.length > maxLength)
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      option,
      value,
      `a string of at most ${maxLength} characters`,
    )
  return value
}

/** A function; `allowed` words it in the error (default `a function`), e.g. with an example. */
export function fnOption(
  value: unknown,
  option: string,
  allowed = 'a function',
): asserts value is (...args: never[]) => unknown {
  if (typeof value !== 'function') throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, allowed)
}

/**
 * A whole number (a safe integer) of at least `min`. `allowed` words the rule in the error (default: `a whole
 * number >= 0`, `a positive whole number`, or `a whole number >= min`); `code` is the error's (default
 * `ERR_RATEWINDOW_INVALID_OPTION`).
 */
export function wholeNumber(
  value: unknown,
  option: string,
  rule: { min: number; allowed?: string; code?: RateLimitErrorCode },
): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < rule.min) {
    const allowed =
      rule.allowed ??
      (rule.min === 0
        ? 'a whole number >= 0'
        : rule.min === 1
          ? 'a positive whole number'
          : `a whole number >= ${rule.min}`)
    throw invalid(rule.code ?? 'ERR_RATEWINDOW_INVALID_OPTION', option, value, allowed)
  }
}
