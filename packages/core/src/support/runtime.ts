/**
 * The few things core needs from its host, without Node's globals: core loads on Node, Bun, Deno and Cloudflare
 * Workers (without `nodejs_compat`). Nothing here runs at module load.
 */

import { withExplanation } from './errors.js'

/**
 * Every process warning, each explained in docs/errors.md with what to do (a test keeps the two equal). Match on
 * the warning's `code`, never on its text.
 */
export const WARNING_CODES = [
  'RATEWINDOW_SUPERSEDED_LIMITER',
  'RATEWINDOW_LIMITER_PER_REQUEST',
  'RATEWINDOW_SHED',
  'RATEWINDOW_ONERROR_FAILED',
  'RATEWINDOW_OBSERVER_FAILED',
  'RATEWINDOW_UNTRUSTED_PROXY',
  'RATEWINDOW_PERMISSIVE_TRUST_PROXY',
  'RATEWINDOW_PER_ISOLATE_STORE',
  'RATEWINDOW_MIXED_HEADERS',
  'RATEWINDOW_NO_CONNECTION_INFO',
  'RATEWINDOW_INVALID_ADDRESS',
  'RATEWINDOW_SKIPPABLE_MIDDLEWARE',
  'RATEWINDOW_SYNC_UNSUPPORTED',
  'RATEWINDOW_ADMIN_ERROR',
  'RATEWINDOW_QUOTA_EVICTION',
] as const

/** Stable warning codes. */
export type WarningCode = (typeof WARNING_CODES)[number]

interface WarningProcess {
  emitWarning(message: string, options: { code: string }): void
}

/**
 * A process warning (`process.emitWarning`, with its `code`) where the runtime has one (Node, Bun, Deno), else
 * `console.warn` (Workers, and Next.js's Edge runtime, whose `process.emitWarning` throws). The message ends with
 * the link to the code's explanation (docs/errors.md).
 */
export function emitWarning(message: string, code: WarningCode): void {
  message = withExplanation(message, code)
  const host = (globalThis as { process?: Partial<WarningProcess> }).process
  if (typeof host?.emitWarning === 'function') {
    try {
      host.emitWarning(message, { code })
      return
    } catch {
      // NOTE: Next.js's Edge runtime defines `process.emitWarning` as a function that throws ("A Node.js API is
      // used … not supported in the Edge Runtime"): a warning must never fail the request that caused it.
    }
  }
  console.warn(`[ratewindow] ${code}: ${message}`)
}

/** A random v4 UUID (Web Crypto's `crypto.randomUUID`, a global in Node 20, Bun, Deno and Workers). */
export const randomUUID = (): string => globalThis.crypto.randomUUID()

/**
 * Whether this runs on Cloudflare Workers, told the standard way: `navigator.userAgent` is `'Cloudflare-Workers'`
 * there (from compatibility date 2022-03-21).
 */
export function onCloudflareWorkers(): boolean {
  return (globalThis as { navigator?: { userAgent?: unknown } }).navigator?.userAgent === 'Cloudflare-Workers'
}
