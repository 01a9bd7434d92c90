import { invalid } from '@ratewindow/core/support'

/** Asserts a whole number of at least 1, else throws naming `option`. */
export function positiveWhole(value: unknown, option: string): asserts value is number {
  if (!Number.isSafeInteger(value) || (value as number) < 1)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, 'a whole number of at least 1')
}

/** Asserts a function, else throws naming `option`. */
export function isFunction(value: unknown, option: string, example: string): void {
  if (typeof value !== 'function') throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, example)
}
