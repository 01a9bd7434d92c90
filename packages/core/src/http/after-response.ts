/**
 * The refund after the response, for `rateLimit()` (`skipFailedRequests`, `skipSuccessfulRequests`) and
 * `slowDown()` alike: once a response was sent completely, a success check says whether its charge is taken back.
 */
import type { RateLimiter } from '../limiter/limiter.js'
import type { FailureContext } from '../limiter/options.js'
import type { RateLimitResult } from '../result.js'
import { isThenable } from '../support/awaitable.js'
import type { Defer, TrackedResponse } from './binding.js'

/** Receives a failure of a callback or of a refund (a guarded `onError`: it never throws). */
export type Reporter = (error: unknown, context: FailureContext) => void

/**
 * Gives a request's charge back through the limiter that charged it. Never rejects: a failure goes to
 * `report`; `defer` keeps the work alive after the response (a Worker's `waitUntil`).
 */
export function giveBack(
  limiter: RateLimiter,
  result: RateLimitResult,
  report: Reporter,
  defer?: Defer,
): void {
  const work = limiter
    .refund(result)
    .catch((error: unknown) => report(error, { operation: 'refund', key: result.key }))
  defer?.(work)
}

/** What `refundAfterResponse` needs: which outcomes to give back, how to judge one, and what to do. */
export interface RefundRule {
  /** Give back the charge of a response that failed. */
  skipFailedRequests: boolean
  /** Give back the charge of a response that succeeded. */
  skipSuccessfulRequests: boolean
  /**
   * Whether the response succeeded, asked once it was sent completely: true (exactly) for success. May answer a
   * promise; a throw or a rejection is reported and nothing is given back.
   */
  wasSuccessful: () => unknown
  /** Whether the response is one to judge at all besides having been sent (slowDown: the handler ran). */
  judged?: () => boolean
  /** Gives the charge back. */
  refund: () => void
  /** Receives a throw or rejection of `wasSuccessful`. */
  report: (error: unknown) => void
  /** Keeps an async verdict alive after the response, as the refund (a Worker's `waitUntil`). */
  defer?: Defer
}

/**
 * Arms, on `response`, the refund of its charge: when it finishes or closes (whichever comes first, once), a
 * response sent completely is judged by `rule.wasSuccessful`, and given back as `skipFailedRequests` and
 * `skipSuccessfulRequests` say. A response not sent completely (the client left) gets nothing back, since the
 * handler may have run for it (docs/counters.md).
 */
export function refundAfterResponse(response: TrackedResponse, rule: RefundRule): void {
  let judged = false
  const judge = () => {
    if (judged) return
    judged = true
    if (!response.writableFinished || (rule.judged !== undefined && !rule.judged())) return
    let success: unknown
    try {
      success = rule.wasSuccessful()
    } catch (error) {
      // NOTE: a throwing callback must not crash the server from an event listener; the request counts.
      rule.report(error)
      return
    }
    const settle = (ok: unknown) => {
      if (ok === true ? rule.skipSuccessfulRequests : rule.skipFailedRequests) rule.refund()
    }
    if (isThenable(success)) {
      const verdict = Promise.resolve(success).then(settle, rule.report)
      rule.defer?.(verdict)
    } else settle(success)
  }
  response.once('finish', judge)
  response.once('close', judge)
}
