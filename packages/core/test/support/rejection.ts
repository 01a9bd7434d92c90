import { expect } from 'vitest'
import { RateLimitError } from '../../src/index.js'

/** The `RateLimitError` that `run` rejects with; fails the test when it resolves or rejects with anything else. */
export async function rejection(run: () => Promise<unknown>): Promise<RateLimitError> {
  try {
    await run()
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitError)
    return error as RateLimitError
  }
  throw new Error('expected a rejection')
}
