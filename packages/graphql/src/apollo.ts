/**
 * `rateLimitPlugin()`: the Apollo Server 5 plugin. An operation is decided in `didResolveOperation`, after parsing
 * and validation and before execution (an automatic persisted query once its document is known); a refusal is
 * thrown there, and Apollo answers it with its status and headers. An admitted operation is settled in
 * `willSendResponse` (a result streamed in parts: when its stream ends), its in-flight slot given back then
 * (`concurrency`), and its RateLimit headers set on the response. In a batch, the refusal's status stays only if
 * no operation of the batch ran.
 */
import type { ApolloServerPlugin, BaseContext, HTTPGraphQLHead } from '@apollo/server'
import { isRefusal, refusalError } from './errors.js'
import { type AdmittedOperation, GraphQLRateLimiter } from './limiter.js'
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
  const batches = new Batches()
  return {
    async requestDidStart() {
      let admission: AdmittedOperation<TContext> | undefined
      return {
        async didResolveOperation(context) {
          if (context.operation === undefined) return // Apollo answers a document without it itself
          const batch = context.requestIsBatched ? batches.of(context.response.http) : undefined
          const answer = await limiter.admit({
            context: context.contextValue,
            schema: context.schema,
            document: context.document,
            operation: context.operation,
            operationName: context.operationName ?? undefined,
            variables: context.request.variables,
            headers: context.request.http?.headers,
          })
          if (isRefusal(answer)) {
            batch?.refusedWith.add(answer.status)
            throw refusalError(answer, 'map')
          }
          if (batch) batch.ran = true
          admission = answer
        },
        async willSendResponse({ response, requestIsBatched }) {
          if (requestIsBatched) batches.answer(response.http)
          if (admission === undefined) return
          // Settled (when it settles) and its in-flight slot given back: a stream's once it ends.
          const { body } = response
          if (body?.kind === 'incremental')
            body.subsequentResults = limiter.followStream(
              admission,
              body.subsequentResults as AsyncIterable<object>,
              body.initialResult,
            ) as typeof body.subsequentResults
          else if (body?.kind === 'single') await limiter.settle(admission, body.singleResult)
          else limiter.release(admission)
          for (const name in admission.headers) response.http.headers.set(name, admission.headers[name]!)
        },
      }
    },
    resetKey: (key) => limiter.resetKey(key),
    close: () => limiter.close(),
  }
}

/**
 * The operations of batched HTTP requests, by the response head they share: whether one ran, and the statuses of
 * their refusals. A batch answers one status for all its operations; a client that retries a refused status
 * would run again those that ran (mutations twice), so a batch in which any operation ran answers 200, each
 * refusal in its own result (as GraphQL Yoga answers every batch).
 */
class Batches {
  readonly #byHead = new WeakMap<HTTPGraphQLHead, { ran: boolean; refusedWith: Set<number> }>()

  of(head: HTTPGraphQLHead): { ran: boolean; refusedWith: Set<number> } {
    let batch = this.#byHead.get(head)
    if (batch === undefined) {
      batch = { ran: false, refusedWith: new Set() }
      this.#byHead.set(head, batch)
    }
    return batch
  }

  /**
   * Before each operation's response: Apollo has merged a refusal's status into the shared head by then. Each
   * operation's decision precedes its own response, so the last response of the batch sees every decision.
   */
  answer(head: HTTPGraphQLHead): void {
    const batch = this.#byHead.get(head)
    if (batch === undefined || !batch.ran || head.status === undefined) return
    if (!batch.refusedWith.has(head.status)) return
    head.status = 200
    head.headers.delete('retry-after') // the refused operations' results carry their `retryAfter`
  }
}
