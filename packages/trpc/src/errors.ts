/**
 * A refusal in tRPC terms: a `TRPCError` (`TOO_MANY_REQUESTS`; `SERVICE_UNAVAILABLE` when the store failed and the
 * failure policy refused; `FORBIDDEN` for a deny-listed client) whose `cause` is a `RateLimitExceeded` with the
 * wait; `rateLimitErrorFormatter` puts that wait in the error's `data`, which the client receives.
 */
import type { RateLimitResult } from '@ratewindow/core'
import type { HttpDecision } from '@ratewindow/core/adapter'
import { TRPCError } from '@trpc/server'

/** The `cause` of a refusal's `TRPCError`: why, and for how long. */
export class RateLimitExceeded extends Error {
  override readonly name = 'RateLimitExceeded'
  /** Whole seconds until the call may pass, as `Retry-After`; 0 for a deny-listed client. */
  readonly retryAfter: number
  /** The decision, as `ctx.rateLimit` holds it for an admitted call. */
  readonly result: RateLimitResult
  /** The headers of the refusal (RateLimit fields and `Retry-After`), as set on the response where it is exposed. */
  readonly headers: Readonly<Record<string, string>>

  constructor(message: string, retryAfter: number, result: RateLimitResult, headers: Record<string, string>) {
    super(message)
    this.retryAfter = retryAfter
    this.result = result
    this.headers = headers
  }
}

/** The engine's refusal as the `TRPCError` the middleware throws. */
export function refusalError({ result, headers }: HttpDecision): TRPCError {
  if (result.source === 'deny-list')
    return new TRPCError({
      code: 'FORBIDDEN',
      message: 'Access denied.',
      cause: new RateLimitExceeded('Access denied.', 0, result, headers),
    })
  const retryAfter = Math.ceil(result.retryAfter / 1000)
  const wait = `retry in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`
  const policy = result.source === 'policy'
  const message = policy
    ? `Rate limiting is unavailable; ${wait}`
    : result.blocked !== undefined
      ? `Blocked after repeated rate limit violations: ${wait}`
      : `Too many requests: ${wait}`
  return new TRPCError({
    code: policy ? 'SERVICE_UNAVAILABLE' : 'TOO_MANY_REQUESTS',
    message,
    cause: new RateLimitExceeded(message, retryAfter, result, headers),
  })
}

/**
 * The wait, in whole seconds, of an error the middleware threw (`TRPCError` with a `RateLimitExceeded` cause);
 * undefined for any other error. For an `errorFormatter` of your own.
 */
export function retryAfterOf(error: unknown): number | undefined {
  const cause = (error as { cause?: unknown } | null | undefined)?.cause
  return cause instanceof RateLimitExceeded ? cause.retryAfter : undefined
}

/**
 * An `errorFormatter` for `initTRPC.create()`: a refusal's `data` gets `retryAfter` (whole seconds), which the
 * client reads as `error.data.retryAfter`; every other error's shape is left as it is.
 * @example
 * const t = initTRPC.context<Context>().create({ errorFormatter: rateLimitErrorFormatter })
 */
export function rateLimitErrorFormatter<TShape extends { data: object }>({
  shape,
  error,
}: {
  shape: TShape
  error: unknown
}): TShape & { data: { retryAfter?: number } } {
  const retryAfter = retryAfterOf(error)
  return retryAfter === undefined ? shape : { ...shape, data: { ...shape.data, retryAfter } }
}
