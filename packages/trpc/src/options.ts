/**
 * The middleware's options: core's middleware options where they mean the same for a procedure call (rules, keys,
 * lists, cost, headers, the store and its failure policy, `concurrency`), and the ones of tRPC's own (`clientIp`,
 * `trustProxy`). The options that need an HTTP response of the procedure's own (`message`, `statusCode`, `delay`,
 * the refunds after the response) have no place in a call that shares its response with a batch: they are refused
 * by name.
 */
import type { Awaitable, HttpRateLimitOptions, TrustProxy } from '@ratewindow/core'
import {
  addressOptions,
  middlewareOptionNames,
  type SettledConcurrency,
  settledConcurrency,
  type TrustedHop,
} from '@ratewindow/core/adapter'
import { fnOption, rejectUnknownOptions, requireObject } from '@ratewindow/core/support'
import type { TRPCProcedureType } from '@trpc/server'

/**
 * One procedure call, as the options' functions (`key`, `skip`, `cost`, `rules`, `limit`, …) receive it: the
 * middleware's own arguments, `next` aside. With a batch (`httpBatchLink`), each call of the batch is one of these.
 */
// biome-ignore lint/suspicious/noExplicitAny: the app's context and meta types, as tRPC's own middleware types take them.
export interface TrpcCall<TContext = any, TMeta = any> {
  /** The context your `createContext` made (the adapter's `req`, `res` or `resHeaders` in it, if you put them). */
  ctx: TContext
  /** `'query'`, `'mutation'` or `'subscription'`. */
  type: TRPCProcedureType
  /** The procedure's path, such as `'post.byId'`. */
  path: string
  /** The input, as the validators before this middleware left it (none yet when it comes first). */
  input: unknown
  /** The input as the client sent it, before any validator ran. */
  getRawInput: () => Promise<unknown>
  /** The procedure's `.meta()`, if any: a place for per-procedure rules. */
  meta: TMeta | undefined
  /** Aborts when the client cancels the call or disconnects. */
  signal: AbortSignal | undefined
  /** The call's place in its batch (0 without one). */
  batchIndex: number
}

/** The options of `rateLimit()`. */
// biome-ignore lint/suspicious/noExplicitAny: the app's context and meta types.
export interface TrpcRateLimitOptions<TContext = any, TMeta = any>
  extends Omit<
    HttpRateLimitOptions<TrpcCall<TContext, TMeta>>,
    | 'statusCode'
    | 'quotaStatusCode'
    | 'denyStatusCode'
    | 'message'
    | 'problemDetails'
    | 'concurrency'
    | 'delay'
    | 'reservationHorizon'
    | 'overrides'
    | 'skipFailedRequests'
    | 'skipSuccessfulRequests'
    | 'requestWasSuccessful'
    | 'key'
  > {
  /**
   * At most `limit` calls of a key running at once: a call takes a slot once its cost is admitted and gives it
   * back when its procedure returns or throws (a streamed result: when its stream ends or is cancelled; a
   * subscription: once it started); one more is refused (`TOO_MANY_REQUESTS`, `retryAfter` 1) and its charge given
   * back. Each call is admitted on its cost before those running settle theirs (`ctx.rateLimit.settle`), so this
   * bounds what underestimates run at once: the work of a key stays within `limit` + `maxDebt` + this many
   * underestimates (docs/trpc.md). On by default with a store that has leases (MemoryStore, RedisStore,
   * DurableObjectStore; none with one without, such as SyncedStore); `false` turns it off. A batch of more calls
   * than this runs the rest refused.
   * @default { limit: 10 }, with a store that has leases
   */
  concurrency?: CallConcurrency | false
  /**
   * The caller's key, from something the server verified (the user of a verified session in your context, an
   * account found by its API key); `undefined` keys the call by its client address instead, as without `key`, so
   * that callers without one never share a bucket. @default the client address
   * @example key: ({ ctx }) => ctx.user && `user:${ctx.user.id}`
   */
  key?: (call: TrpcCall<TContext, TMeta>) => Awaitable<string | undefined>
  /**
   * The proxies in front of the app that append to `X-Forwarded-For`, read from the request in your context
   * (`ctx.req`: the Node adapter's request, or the fetch adapter's `Request`): their number (`1` on Vercel and
   * behind one proxy), or their addresses and networks (`'10.0.0.0/8'`). With the Node adapter the connection's
   * address must be one of them (hop 0); the fetch adapter sees no connection, and its platform's proxy is hop 0.
   * @default none: the socket address of the Node request in `ctx.req`
   */
  trustProxy?: TrustProxy
  /**
   * The client address for the default key, by your own means: behind a proxy you control, the address it
   * forwards; with the fetch adapter, what the runtime tells (Bun's `server.requestIP`, Deno's `remoteAddr`) put in
   * your context. @default the socket address of the Node request in the context (`ctx.req`), as tRPC's Node
   * adapters give it (standalone, Express, Fastify, WebSocket)
   */
  clientIp?: (call: TrpcCall<TContext, TMeta>) => string | undefined
}

/**
 * What the compiler asks of the options for a context type: without a Node request in the context (`req` with a
 * socket, as tRPC's Node adapters give it), the default key has no address to read, so `key` or `clientIp` is
 * required. A context typed `any` (the default) asks nothing; a fetch adapter's context without either fails at
 * the call, with a coded error naming `key`.
 */
// biome-ignore lint/suspicious/noExplicitAny: the app's context and meta types.
export type KeySource<TContext = any, TMeta = any> = TContext extends { req: { socket: unknown } }
  ? unknown
  :
      | { key: NonNullable<TrpcRateLimitOptions<TContext, TMeta>['key']> }
      | { clientIp: NonNullable<TrpcRateLimitOptions<TContext, TMeta>['clientIp']> }
      | { trustProxy: TrustProxy }

const TRPC_NAMES = middlewareOptionNames<TrpcRateLimitOptions>(
  {
    statusCode: true,
    quotaStatusCode: true,
    denyStatusCode: true,
    message: true,
    problemDetails: true,
    delay: true,
    reservationHorizon: true,
    overrides: true,
    skipFailedRequests: true,
    skipSuccessfulRequests: true,
    requestWasSuccessful: true,
  },
  { clientIp: true, trustProxy: true },
)

/**
 * The `concurrency` option of `rateLimit()`: core's, but for `releaseOnClose` (a call holds its slot until its
 * procedure is done, whatever its connection does).
 */
export type CallConcurrency = SettledConcurrency

/** The middleware's defaults of its own. */
export const TRPC_DEFAULTS = {
  concurrency: { limit: 10, renew: true },
} as const satisfies { concurrency: CallConcurrency }

/** The options resolved: the engine's part (`key` as given), `clientIp`, and the proxies `trustProxy` trusts. */
export interface TrpcConfig<TContext, TMeta> {
  engine: Omit<HttpRateLimitOptions<TrpcCall<TContext, TMeta>>, 'key'>
  key: TrpcRateLimitOptions<TContext, TMeta>['key']
  clientIp: ((call: TrpcCall<TContext, TMeta>) => string | undefined) | undefined
  trusted: TrustedHop | undefined
}

/** Checks the options of tRPC's own, once; core's engine checks the rest when it is built. */
export function resolveTrpcOptions<TContext, TMeta>(
  options: TrpcRateLimitOptions<TContext, TMeta>,
  where: string,
): TrpcConfig<TContext, TMeta> {
  requireObject(options, 'options', "{ limit: 100, window: '1m', key: ({ ctx }) => ctx.user.id }")
  rejectUnknownOptions(options, TRPC_NAMES, where)
  const { clientIp: givenClientIp, trustProxy, key, concurrency, ...rest } = options
  if (key !== undefined) fnOption(key, 'key', 'a function of the call returning a string')
  const { clientIp, trusted } = addressOptions({ clientIp: givenClientIp, trustProxy })
  const engine = {
    ...rest,
    concurrency: settledConcurrency(
      concurrency,
      options.store,
      TRPC_DEFAULTS.concurrency,
      'a call gives its slot back once its procedure is done, whatever its connection does',
    ),
  }
  return { engine, key, clientIp, trusted }
}
