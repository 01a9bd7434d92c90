/**
 * Calling code the user passed in (`onError`, observer callbacks) so that it cannot hurt a request, and the
 * default `onError`: never silent, never a flood.
 */

import { emitWarning, type WarningCode } from './runtime.js'

/** How often at most a guarded callback's own failure, or the default log, is written. */
const REPORT_INTERVAL_MS = 10_000

/**
 * Wraps a user callback so that it cannot hurt the caller: a throw or a rejection becomes a process warning
 * (`warningCode`; its text is `heading` and the failure's message), at most once per 10 s.
 */
export function guarded<A extends unknown[]>(
  callback: (...args: A) => unknown,
  heading: string,
  warningCode: WarningCode,
): (...args: A) => void {
  let lastWarning = Number.NEGATIVE_INFINITY
  const warn = (failure: unknown) => {
    const now = performance.now()
    if (now - lastWarning < REPORT_INTERVAL_MS) return
    lastWarning = now
    try {
      const text = failure instanceof Error ? failure.message : String(failure)
      emitWarning(`${heading}: ${text}`, warningCode)
    } catch {
      // a warning listener that throws: nothing more can be done without risking the request
    }
  }
  return (...args) => {
    try {
      const returned = callback(...args) as { then?: unknown } | undefined
      if (typeof returned?.then === 'function') (returned as PromiseLike<unknown>).then(undefined, warn)
    } catch (failure) {
      warn(failure)
    }
  }
}

/** A user's `onError`, guarded (warning code `RATEWINDOW_ONERROR_FAILED`). */
export function guardedReporter<C>(
  onError: (error: unknown, context: C) => unknown,
): (error: unknown, context: C) => void {
  return guarded(onError, 'onError failed while reporting a store failure', 'RATEWINDOW_ONERROR_FAILED')
}

/**
 * One observer callback, guarded (warning code `RATEWINDOW_OBSERVER_FAILED`). Undefined stays undefined, so the
 * unused path is one check.
 */
export function guardedObserver<E>(
  callback: ((event: E) => unknown) | undefined,
  name: string,
): ((event: E) => void) | undefined {
  return callback === undefined
    ? undefined
    : guarded(callback, `observer.${name} failed`, 'RATEWINDOW_OBSERVER_FAILED')
}

/**
 * The default `onError`: logs the first failure, then at most one summary line per 10 s while failures continue,
 * naming the limiter and the operation. `owner` names the limiter in every line (`'slowDown()'`) instead of the
 * context's `limiter`, where that is a namespace no user would recognise.
 */
export function throttledErrorLog(owner?: string): (error: unknown, context?: unknown) => void {
  let lastLog = Number.NEGATIVE_INFINITY
  let suppressed = 0
  return (error, failure) => {
    const context = failure as { operation?: string; limiter?: string } | undefined
    const now = performance.now()
    if (now - lastLog < REPORT_INTERVAL_MS) {
      suppressed++
      return
    }
    const more = suppressed > 0 ? ` (and ${suppressed} more since the last report)` : ''
    const where =
      owner !== undefined
        ? ` in ${owner}`
        : context?.limiter === undefined
          ? ''
          : ` in limiter ${context.limiter}`
    const operation = context?.operation === undefined ? '' : ` (${context.operation})`
    console.error(
      `[ratewindow] store failure${where}${operation}${more}: ${error instanceof Error ? error.message : String(error)}`,
    )
    lastLog = now
    suppressed = 0
  }
}
