/**
 * `rateLimitPlugin()`: the Apollo Server 5 plugin. An operation is decided in `didResolveOperation`, after parsing
 * and validation and before execution (an automatic persisted query once its document is known); a refusal is
 * thrown there, and Apollo answers it with its status and headers. An admitted operation is settled in
 * `willSendResponse` (a result streamed in parts: when its stream ends), and its RateLimit headers set on the
 * response.
 */
import type { ApolloServerPlugin, BaseContext } from '@apollo/server'
import { isRefusal, refusalError } from './errors.js'
import { type Admission, GraphQLRateLimiter } from './limiter.js'
import type { GraphQLRateLimitOptions } from './options.js'

export type { GraphQLOperation, GraphQLRateLimitOptions } from './options.js'

/** The plugin, with a handle to forget a client's counters. */
export interface ApolloRateLimitPlugin<TContext extends BaseContext = BaseContext>
  extends ApolloServerPlugin<TContext> {
  /** Forgets `key` in every counter of this plugin (e.g. after a successful login). Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** For a server that goes: gives up this plugin's counters (a store you passed stays yours to close). */
  close(): void
}

/**
 * Limits each operation by its cost: the estimate reserved before it runs, settled to its actual cost after.
 * @example
 * const server = new ApolloServer({ schema, plugins: [rateLimitPlugin({ limit: 1000, window: '1m', key })] })
 */
export function rateLimitPlugin<TContext extends BaseContext = BaseContext>(
  options: GraphQLRateLimitOptions<TContext> = {},
): ApolloRateLimitPlugin<TContext> {
  const limiter = new GraphQLRateLimiter<TContext>(options, 'rateLimitPlugin()')
  return {
    async requestDidStart() {
      let admission: Admission<TContext> | undefined
      return {
        async didResolveOperation(context) {
          if (context.operation === undefined) return // Apollo answers a document without it itself
          const answer = await limiter.admit({
            context: context.contextValue,
            schema: context.schema,
            document: context.document,
            operation: context.operation,
            operationName: context.operationName ?? undefined,
            variables: context.request.variables,
            headers: context.request.http?.headers,
          })
          if (isRefusal(answer)) throw refusalError(answer, 'map')
          admission = answer
        },
        async willSendResponse({ response }) {
          if (admission === undefined) return
          const { body } = response
          if (body?.kind === 'single') await limiter.settle(admission, body.singleResult)
          else if (body?.kind === 'incremental')
            body.subsequentResults = limiter.followStream(
              admission,
              body.subsequentResults as AsyncIterable<object>,
              body.initialResult,
            ) as typeof body.subsequentResults
          for (const name in admission.headers) response.http.headers.set(name, admission.headers[name]!)
        },
      }
    },
    resetKey: (key) => limiter.resetKey(key),
    close: () => limiter.close(),
  }
}
