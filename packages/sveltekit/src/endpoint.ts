import { RateLimitError, type RateLimitResult } from '@ratewindow/core'
import type { RequestEvent } from '@sveltejs/kit'
import { decideFor, INVALID_ADDRESS } from './binding.js'
import {
  type KitRateLimitOptions,
  kitEngine,
  limitedResponse,
  type RateLimitLocals,
  tracksResponse,
} from './handle.js'

/** A `+server.ts` handler as `withRateLimit` returns it, with handles on its counters. */
export type RateLimitedHandler<E extends RequestEvent> = ((event: E) => Promise<Response>) & {
  /** Forgets `key` in every counter of this limiter. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Gives up the counters, and closes the memory store made for itself (a `store` you passed stays open). */
  close(): void
}

/**
 * Limits one `+server.ts` handler, with a limit of its own (`export const POST = withRateLimit(handler, { limit: 10,
 * window: '1m' })`): a refused request gets 429 with the RateLimit headers, `Retry-After` and the body, and the
 * handler does not run; an admitted one runs it, with the decision on `event.locals.rateLimit`, and its response
 * gets the RateLimit headers. Every option works here, `skipFailedRequests` and `concurrency` included (judged by
 * the handler's response once it returned). Build it once, at module level.
 */
export function withRateLimit<E extends RequestEvent>(
  handler: (event: E) => Response | Promise<Response>,
  options: KitRateLimitOptions<E> = {},
): RateLimitedHandler<E> {
  if (typeof handler !== 'function')
    throw new TypeError('withRateLimit(handler, options): `handler` must be the endpoint function.')
  const engine = kitEngine<E>(options, 'withRateLimit()')
  const tracks = tracksResponse(engine, options)

  const rateLimitedHandler = (event: E): Promise<Response> =>
    limitedResponse(engine, tracks, event, options.handler, () => handler(event))
  return Object.assign(rateLimitedHandler, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}

/** Options of `rateLimitAction()`: a form action has no response of its own, so none of the response options. */
export type ActionRateLimitOptions<E extends RequestEvent = RequestEvent> = Omit<
  KitRateLimitOptions<E>,
  | 'skipFailedRequests'
  | 'skipSuccessfulRequests'
  | 'requestWasSuccessful'
  | 'concurrency'
  | 'delay'
  | 'handler'
>

/** What a form action learns: whether to go on, and what to tell the client when not. */
export interface ActionDecision {
  /** Whether the action may run. */
  allowed: boolean
  /** Seconds until the same call would pass (0 when allowed): what `Retry-After` says. */
  retryAfter: number
  /** The RateLimit headers of the decision: `event.setHeaders(decision.headers)` sends them. */
  headers: Record<string, string>
  /**
   * The limiter's result; undefined when the call was skipped (`skip`, `allowList`, `enabled: false`), or refused
   * because its client address is not an address (then `allowed` is false).
   */
  result: RateLimitResult | undefined
}

/** The limiter of a form action, with handles on its counters. */
export interface ActionRateLimiter<E extends RequestEvent = RequestEvent> {
  /** Decides for one submission: `await limit(event)` at the top of the action. Rejects on a failing callback. */
  (event: E): Promise<ActionDecision>
  /** Forgets `key` in every counter of this limiter. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Gives up the counters, and closes the memory store made for itself (a `store` you passed stays open). */
  close(): void
}

const PASS: ActionDecision = Object.freeze({ allowed: true, retryAfter: 0, headers: {}, result: undefined })
const REFUSED: ActionDecision = Object.freeze({
  allowed: false,
  retryAfter: 0,
  headers: {},
  result: undefined,
})

const RESPONSE_OPTIONS = ['skipFailedRequests', 'skipSuccessfulRequests', 'concurrency', 'delay', 'handler']

/**
 * Limits a form action: build it once at module level, call it at the top of the action, and answer with
 * `fail(429, …)` when `allowed` is false (a form action answers with its own data, not a response). The decision
 * is on `event.locals.rateLimit` too.
 */
export function rateLimitAction<E extends RequestEvent = RequestEvent>(
  options: ActionRateLimitOptions<E> = {},
): ActionRateLimiter<E> {
  for (const name of RESPONSE_OPTIONS) {
    const value = (options as Record<string, unknown>)[name]
    if (value !== undefined && value !== false)
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `rateLimitAction(): \`${name}\` needs a response, which a form action does not make; limit a +server.ts endpoint with withRateLimit() for it.`,
        { option: name },
      )
  }
  const engine = kitEngine<E>(options, 'rateLimitAction()')

  async function limitAction(event: E): Promise<ActionDecision> {
    const decision = await decideFor(engine, event)
    if (decision === INVALID_ADDRESS) return REFUSED
    if (decision === undefined || decision.gone) return PASS
    const { result } = decision
    if (result.allowed) (event.locals as RateLimitLocals).rateLimit = result
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
