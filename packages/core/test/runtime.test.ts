/** support/runtime.ts: what core asks of its host, on hosts that only look like Node. */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { emitWarning } from '../src/support/runtime.js'

afterEach(() => vi.restoreAllMocks())

describe('emitWarning', () => {
  it("falls back to console.warn where process.emitWarning throws (Next.js's Edge runtime), never failing its caller", () => {
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {
      throw new Error(
        'A Node.js API is used (process.emitWarning) which is not supported in the Edge Runtime.',
      )
    })
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    expect(() => emitWarning('counts per instance', 'RATEWINDOW_PER_ISOLATE_STORE')).not.toThrow()
    expect(warn).toHaveBeenCalledWith(
      '[ratewindow] RATEWINDOW_PER_ISOLATE_STORE: counts per instance. See https://github.com/ratewindow/ratewindow/blob/main/docs/errors.md#ratewindow-per-isolate-store',
    )
  })

  it('emits a process warning with its code where the runtime has one', () => {
    const emitted = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    emitWarning('message.', 'RATEWINDOW_SHED')
    expect(emitted).toHaveBeenCalledWith(
      'message. See https://github.com/ratewindow/ratewindow/blob/main/docs/errors.md#ratewindow-shed',
      { code: 'RATEWINDOW_SHED' },
    )
  })
})
