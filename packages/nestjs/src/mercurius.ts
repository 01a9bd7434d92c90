/**
 * `@ratewindow/nestjs/mercurius`: @ratewindow/graphql's operation cost model under `@nestjs/mercurius`, as
 * Mercurius hooks (`hooks` of `MercuriusDriverConfig`). The decision is @ratewindow/graphql's `GraphQLRateLimiter`,
 * the one its Envelop and Apollo plugins use: the estimate reserved in `preExecution` (after parsing and
 * validation, before any resolver), settled to the actual cost in `onResolution`, before the response is sent.
 * Under Apollo (`@nestjs/apollo`), @ratewindow/graphql's `rateLimitPlugin()` goes in the driver's `plugins`.
 */
import type { ServerResponse } from 'node:http'
import {
  type AdmittedOperation,
  type ExecutionOutcome,
  type GraphQLOperation,
  GraphQLRateLimiter,
  type GraphQLRateLimitOptions,
  isRefusal,
} from '@ratewindow/graphql'
import { type DocumentNode, type GraphQLSchema, getOperationAST } from 'graphql'
import { type NestHttpRequest, writeHeaders } from './binding.js'

/** The part of Mercurius's context the hooks read: Fastify's reply (and through it, the request). */
export interface MercuriusRequestContext {
  reply?: {
    request: NestHttpRequest & { body?: unknown }
    header(name: string, value: string): unknown
    sent: boolean
    raw: ServerResponse
  }
  // biome-ignore lint/suspicious/noExplicitAny: what the app's `context` function adds
  [field: string]: any
}

/** The hooks to pass as `hooks`, and the handles of the limiter behind them. */
export interface MercuriusRateLimit<TContext extends MercuriusRequestContext = MercuriusRequestContext> {
  hooks: {
    preExecution(
      schema: GraphQLSchema,
      document: DocumentNode,
      context: TContext,
      variables?: Record<string, unknown>,
    ): Promise<void>
    /** `execution`: Mercurius's result (`data`, `errors`). */
    onResolution(execution: ExecutionOutcome, context: TContext): Promise<void>
  }
  /** Forgets `key` in every counter of these hooks (e.g. after a successful login). Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** For a server that goes: gives up the counters (a store you passed stays yours to close). */
  close(): void
}

/** A refusal as Mercurius answers a thrown error: its `statusCode` the response's, its `extensions` the error's. */
class MercuriusRefusal extends Error {
  readonly extensions: Record<string, unknown>
  readonly statusCode: number

  constructor(message: string, extensions: Record<string, unknown>, statusCode: number) {
    super(message)
    this.name = 'MercuriusRefusal'
    this.extensions = extensions
    this.statusCode = statusCode
  }
}

/**
 * Limits each operation by its cost, as @ratewindow/graphql's plugins do, with their options. The default key is the
 * client address of Fastify's request (`reply.request.ip`, after the `FastifyAdapter`'s `trustProxy`).
 * @example
 * const limiter = mercuriusRateLimit({ limit: 1000, window: '1m' })
 * GraphQLModule.forRoot<MercuriusDriverConfig>({ driver: MercuriusDriver, typeDefs, hooks: limiter.hooks })
 */
export function mercuriusRateLimit<TContext extends MercuriusRequestContext = MercuriusRequestContext>(
  options: GraphQLRateLimitOptions<TContext> = {},
): MercuriusRateLimit<TContext> {
  const limiter = new GraphQLRateLimiter<TContext>(
    { clientIp: (operation: GraphQLOperation<TContext>) => operation.context.reply?.request.ip, ...options },
    'mercuriusRateLimit()',
  )
  /** Each request's admitted operation, by its context, until it is settled. */
  const admitted = new WeakMap<object, AdmittedOperation<TContext>>()
  return {
    hooks: {
      async preExecution(schema, document, context, variables) {
        const request = context.reply?.request
        const body = request?.body as { operationName?: unknown } | undefined
        const name = typeof body?.operationName === 'string' ? body.operationName : undefined
        const operation = getOperationAST(document, name)
        if (operation === null || operation === undefined) return // Mercurius answers this one itself
        const answer = await limiter.admit({
          context,
          schema,
          document,
          operation,
          operationName: operation.name?.value ?? name,
          variables,
          headers: request === undefined ? undefined : { get: (field) => header(request, field) },
        })
        if (!isRefusal(answer)) {
          admitted.set(context, answer)
          return
        }
        if (context.reply !== undefined) writeHeaders(context.reply, answer.headers)
        const { code, message, status, retryAfter, cost } = answer
        const extensions = {
          code,
          ...(retryAfter === undefined ? {} : { retryAfter }),
          ...(cost === undefined ? {} : { cost }),
        }
        throw new MercuriusRefusal(message, extensions, status)
      },
      async onResolution(execution, context) {
        const admission = admitted.get(context)
        if (admission === undefined) return
        admitted.delete(context)
        await limiter.settle(admission, execution)
        if (context.reply !== undefined) writeHeaders(context.reply, admission.headers)
      },
    },
    resetKey: (key) => limiter.resetKey(key),
    close: () => limiter.close(),
  }
}

function header(request: NestHttpRequest, name: string): string | undefined {
  const value = request.headers[name.toLowerCase()]
  return Array.isArray(value) ? value.join(', ') : value
}
