import type { RateLimitResult } from '@ratewindow/core'
import type { HeadersCarrier } from './address.js'
import {
  decideFor,
  INVALID_ADDRESS,
  type NextRateLimitOptions,
  nextEngine,
  type ResponseOption,
  refuseResponseOptions,
} from './binding.js'
import { warnPerInstance } from './edge.js'

/** What a server action's limiter reads: the request's headers (`await headers()` from `next/headers`). */
export interface ActionRequest extends HeadersCarrier {}

/** Options of `rateLimitAction()`: callbacks receive `{ headers }`. The response options are `withRateLimit`'s. */
export type ActionRateLimitOptions = Omit<NextRateLimitOptions<ActionRequest>, ResponseOption | 'handler'>

/** What a server action learns: whether to go on, and what to tell the client when not. */
export interface ActionDecision {
  /** Whether the action may run. */
  allowed: boolean
  /** Seconds until the same call would pass (0 when allowed): what `Retry-After` would say. */
  retryAfter: number
  /** The RateLimit headers the decision would send, for an answer of your own. */
  headers: Record<string, string>
  /**
   * The limiter's result; undefined when the call was skipped (`skip`, `allowList`, `enabled: false`), or refused
   * because its client address is not an address (then `allowed` is false).
   */
  result: RateLimitResult | undefined
}

/** The limiter of a server action, with handles on its counters. */
export interface ActionRateLimiter {
  /** Decides for one call of the action: `await limiter(await headers())`. Rejects on a failing callback. */
  (headers: ActionRequest['headers']): Promise<ActionDecision>
  /** Forgets `key` in every counter of this limiter. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Gives up the counters, and closes the memory store made for itself (a `store` you passed stays open). */
  close(): void
}

const PASS: ActionDecision = Object.freeze({ allowed: true, retryAfter: 0, headers: {}, result: undefined })
/** A call whose client address is not an address: refused, counted nowhere (a warning says so once). */
const REFUSED: ActionDecision = Object.freeze({
  allowed: false,
  retryAfter: 0,
  headers: {},
  result: undefined,
})

/**
 * Limits a server action: build it once at module level, call it with the request's headers at the top of the
 * action, and answer as the action sees fit when `allowed` is false (a server action has no status to set).
 */
export function rateLimitAction(options: ActionRateLimitOptions = {}): ActionRateLimiter {
  refuseResponseOptions(options, 'a server action')
  const engine = nextEngine<ActionRequest>(options, 'rateLimitAction()')

  async function limitAction(headers: ActionRequest['headers']): Promise<ActionDecision> {
    warnPerInstance(options)
    const decision = await decideFor(engine, { headers })
    if (decision === INVALID_ADDRESS) return REFUSED
    if (decision === undefined || decision.gone) return PASS
    const { result } = decision
    return {
      allowed: result.allowed,
      retryAfter: Number(decision.headers['Retry-After'] ?? 0),
      headers: decision.headers,
      result,
    }
  }
  return Object.assign(limitAction, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}
