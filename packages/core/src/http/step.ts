import type { Awaitable } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'

/**
 * The value-or-promise fork of the request pipeline, written once: `next(value)` at once for a value (the memory
 * store and synchronous callbacks stay synchronous), after it for a promise or any thenable. A throw in `next`
 * throws for a value and rejects for a promise, as the step itself would.
 */
export function step<T, R>(value: T | PromiseLike<T>, next: (value: T) => Awaitable<R>): Awaitable<R> {
  return isThenable(value) ? Promise.resolve(value).then(next) : next(value)
}
