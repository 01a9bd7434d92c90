/** The unhandled-rejection guard of a test file, written once. */
import { afterAll, beforeAll } from 'vitest'

/**
 * Records every unhandled rejection from the first test of the file (or `describe`) that calls it to the last:
 * what the code under test must never leave behind. The caller asserts on the list where it means to (after
 * each test, or once at the end).
 */
export function unhandledRejections(): unknown[] {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => void unhandled.push(reason)
  beforeAll(() => {
    process.on('unhandledRejection', onUnhandled)
  })
  afterAll(() => {
    process.off('unhandledRejection', onUnhandled)
  })
  return unhandled
}
