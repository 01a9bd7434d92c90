/**
 * How a Redis-backed store's `prefix` meets a limiter's namespace in its keys: `<store prefix><limiter prefix>:…`.
 */
import { invalid } from '../support/errors.js'

/**
 * The text put before every key of a store with `prefix` and `separator` (validated): with `separator: true`, the
 * prefix and a `:` unless it is empty or already ends with one.
 *
 * NOTE: off by default. Without it the store prefix and the limiter prefix join as they are, so that store
 * prefixes `ab` and `a` beside limiter prefixes `rw` and `brw` share counters (`abrw:…`). Adding the `:` for every
 * prefix would rename the keys of every store whose prefix does not end with one: in a rolling deploy, the
 * processes on the new version would count from zero beside those on the old, and every limit would be passed
 * once more. A prefix already ending with `:` (or empty) is the same either way.
 */
export function storeKeyPrefix(prefix: string, separator: unknown): string {
  if (separator !== undefined && typeof separator !== 'boolean')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'separator', separator, 'true or false')
  return separator === true && prefix !== '' && !prefix.endsWith(':') ? `${prefix}:` : prefix
}
