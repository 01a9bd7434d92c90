import { GraphQLError, type GraphQLErrorExtensions } from 'graphql'
import type { Refusal } from './limiter.js'

/**
 * A refusal as the GraphQL error the client receives: `extensions.code` (`RATE_LIMITED`, `FORBIDDEN`,
 * `MAX_DEPTH_EXCEEDED`, `MAX_COST_EXCEEDED`, `MAX_INTROSPECTION_EXCEEDED`), `retryAfter` (seconds) and `cost` where known, and `extensions.http`,
 * which GraphQL Yoga and Apollo Server turn into the response's status and headers and do not send. Yoga reads
 * those headers as a plain object, Apollo as a `Map`: `headers` says which.
 */
export function refusalError(refusal: Refusal, headers: 'object' | 'map'): GraphQLError {
  const { code, message, status, retryAfter, cost } = refusal
  // NOTE: built untyped: GraphQL Yoga's declarations narrow `extensions.http.headers` to an object for every
  // program that includes them, and Apollo needs a Map there.
  const extensions: Record<string, unknown> = {
    code,
    ...(retryAfter === undefined ? {} : { retryAfter }),
    ...(cost === undefined ? {} : { cost }),
    http: {
      status,
      headers: headers === 'map' ? new Map(Object.entries(refusal.headers)) : { ...refusal.headers },
    },
  }
  return new GraphQLError(message, { extensions: extensions as GraphQLErrorExtensions })
}

/** Whether `admit` refused the operation. */
export const isRefusal = (answer: object): answer is Refusal => 'code' in answer
