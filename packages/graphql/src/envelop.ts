/**
 * `useRateLimit()`: the Envelop plugin, for GraphQL Yoga and any server Envelop runs. An operation is decided in
 * `onExecute` (`onSubscribe` for a subscription), after parsing and validation; a refusal is its result, and
 * nothing executes. An admitted query or mutation is settled in `onExecuteDone`, before the response is sent (a
 * result streamed in parts, `@defer`/`@stream`: when its stream ends or is cancelled), and gives its in-flight
 * slot back (`concurrency`) then; on Yoga, the RateLimit headers are written to the HTTP response (`onResponse`,
 * a Yoga hook Envelop ignores).
 */
import type { Plugin } from '@envelop/core'
import type { ExecutionArgs } from 'graphql'
import { getOperationAST } from 'graphql'
import { isRefusal, refusalError } from './errors.js'
import { type AdmittedOperation, GraphQLRateLimiter } from './limiter.js'
import type { GraphQLRateLimitOptions } from './options.js'

export type { GraphQLOperation, GraphQLRateLimitOptions } from './options.js'

/** A GraphQL context of any shape, as Envelop's own plugin type takes it. */
// biome-ignore lint/suspicious/noExplicitAny: the server's context type.
type AnyContext = Record<string, any>

/** The plugin, with a handle to forget a client's counters. */
export interface EnvelopRateLimitPlugin<TContext extends AnyContext = AnyContext> extends Plugin<TContext> {
  /** GraphQL Yoga's hook: writes the RateLimit headers of the request's operations to its response. */
  onResponse(payload: { request: Request; response: Response }): void
  /** Forgets `key` in every counter of this plugin (e.g. after a successful login). Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** For a server that goes: gives up this plugin's counters (a store you passed stays yours to close). */
  close(): void
}

/**
 * Limits each operation by its cost: the estimate reserved before it runs, settled to its actual cost after.
 * @example
 * const yoga = createYoga({ schema, plugins: [useRateLimit({ limit: 1000, window: '1m' })] })
 */
export function useRateLimit<TContext extends AnyContext = AnyContext>(
  options: GraphQLRateLimitOptions<TContext> = {},
): EnvelopRateLimitPlugin<TContext> {
  const limiter = new GraphQLRateLimiter<TContext>(options, 'useRateLimit()')
  /** The headers of each HTTP request's admitted operations (a batch: the last one's), until Yoga responds. */
  const headersOf = new WeakMap<object, Record<string, string>>()

  async function admit(
    args: ExecutionArgs,
  ): Promise<AdmittedOperation<TContext> | ReturnType<typeof refusalError> | undefined> {
    const operation = getOperationAST(args.document, args.operationName)
    if (operation === null || operation === undefined) return undefined // graphql-js answers this one itself
    const context = args.contextValue as TContext
    const request = (context as { request?: Request } | undefined)?.request
    const answer = await limiter.admit({
      context,
      schema: args.schema,
      document: args.document,
      operation,
      operationName: operation.name?.value ?? args.operationName ?? undefined,
      variables: args.variableValues ?? undefined,
      headers: request?.headers,
    })
    if (isRefusal(answer)) return refusalError(answer, 'object')
    if (request !== undefined && Object.keys(answer.headers).length > 0)
      headersOf.set(request, answer.headers)
    return answer
  }

  return {
    async onExecute({ args, setResultAndStopExecution }) {
      const answer = await admit(args)
      if (answer === undefined) return
      if (!('operation' in answer)) return setResultAndStopExecution({ errors: [answer] })
      if (answer.decision === undefined) return
      // Settled (when it settles) and its in-flight slot given back once it ran: a stream, once it ends.
      return {
        async onExecuteDone({ result, setResult }) {
          if (Symbol.asyncIterator in result) setResult(limiter.followStream(answer, result) as typeof result)
          else await limiter.settle(answer, result)
        },
      }
    },
    // A subscription reserves its estimate once, when it subscribes; its events are not charged, and it holds no
    // in-flight slot past its start.
    async onSubscribe({ args, setResultAndStopExecution }) {
      const answer = await admit(args)
      if (answer === undefined) return
      if (!('operation' in answer)) setResultAndStopExecution({ errors: [answer] })
      else limiter.release(answer)
    },
    onResponse({ request, response }) {
      const headers = headersOf.get(request)
      if (headers === undefined) return
      for (const name in headers) response.headers.set(name, headers[name]!)
    },
    resetKey: (key) => limiter.resetKey(key),
    close: () => limiter.close(),
  }
}
