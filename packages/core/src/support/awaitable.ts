/**
 * Whether a store's answer is asynchronous: any thenable, not only this realm's `Promise` (a custom store may
 * return another realm's promises or a library's thenables; `instanceof Promise` missed both).
 */
export function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  )
}
