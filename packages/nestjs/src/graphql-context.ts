/**
 * The guard in GraphQL contexts (`graphql: true`): the HTTP request and response under a resolver call of
 * `@nestjs/graphql`'s Apollo and Mercurius drivers, and a refusal as the GraphQL error the client receives.
 * Nothing here imports `graphql`: graphql-js copies a thrown error's `extensions` onto the error it reports.
 */
import type { ExecutionContext } from '@nestjs/common'
import type { RateLimitResult } from '@ratewindow/core'
import type { NestHttpRequest, PlatformResponse } from './binding.js'

/** A guarded resolver call: the HTTP request and response of its operation, and the call itself. */
export interface GraphQLCall {
  request: NestHttpRequest
  response: PlatformResponse
  /** The call's `info` (one per field resolution): the guard's decisions are marked on it. */
  resolution: object
}

interface DriverContext {
  /** Apollo: Express's request (Nest puts it in the context); its response is `req.res`. */
  req?: NestHttpRequest & { res?: PlatformResponse }
  res?: PlatformResponse
  /** Mercurius: Fastify's reply, whose `request` is Fastify's request. */
  reply?: PlatformResponse & { request?: NestHttpRequest }
}

/**
 * The HTTP request and response of a resolver call (`[root, args, context, info]`); undefined where the
 * operation came over no HTTP request (a subscription over WebSocket), which then passes.
 */
export function graphqlCall(context: ExecutionContext): GraphQLCall | undefined {
  const [, , value, info] =
    context.getArgs<[unknown, unknown, DriverContext | undefined, object | undefined]>()
  if (value === null || typeof value !== 'object' || info === null || typeof info !== 'object')
    return undefined
  const { reply } = value
  if (reply?.request !== undefined) return { request: reply.request, response: reply, resolution: info }
  const request = value.req
  const response = value.res ?? request?.res
  if (request?.headers === undefined || response === undefined) return undefined
  return { request, response, resolution: info }
}

/**
 * A resolver call refused: the error the driver reports in `errors`, with `extensions.code` (`'RATE_LIMITED'`,
 * `'FORBIDDEN'` for a deny-listed client) and `retryAfter` (whole seconds, as `Retry-After`), as the GraphQL
 * plugins of @ratewindow/graphql shape it. The response keeps the driver's status (a field's error: 200, with the
 * other fields' data); the RateLimit and `Retry-After` headers are on it.
 */
export class GraphQLRateLimitError extends Error {
  readonly extensions: { code: 'RATE_LIMITED' | 'FORBIDDEN'; retryAfter?: number }
  /** The decision, as `request.rateLimit`. */
  readonly result: RateLimitResult

  constructor(result: RateLimitResult) {
    const retryAfter = Math.ceil(result.retryAfter / 1000)
    const wait = `retry in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`
    const denied = result.source === 'deny-list'
    super(
      denied
        ? 'Access denied.'
        : result.source === 'policy'
          ? 'Rate limiting is unavailable; retry later.'
          : result.blocked !== undefined
            ? `Blocked after repeated rate limit violations: ${wait}`
            : `Too many requests: ${wait}`,
    )
    this.name = 'GraphQLRateLimitError'
    this.result = result
    this.extensions = denied ? { code: 'FORBIDDEN' } : { code: 'RATE_LIMITED', retryAfter }
  }
}
