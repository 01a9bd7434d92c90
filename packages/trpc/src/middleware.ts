/**
 * `rateLimit()`: the tRPC middleware, a thin binding on core's HTTP engine (`HttpRateLimiter`). The engine decides
 * each call (gate, key, rules, store, failure policy, headers) exactly as it decides a request for the HTTP
 * adapters; this file writes the headers to the response the context exposes, throws a refusal as a `TRPCError`,
 * and hands an admitted call's decision to the procedure as `ctx.rateLimit`.
 */
import type { ConcurrencyResult, RateLimitResult, SettleResult } from '@ratewindow/core'
import { HttpRateLimiter } from '@ratewindow/core/adapter'
import { TRPCError, type TRPCMiddlewareFunction } from '@trpc/server'
import { addressOf, trpcBinding, writeHeaders } from './binding.js'
import { refusalError } from './errors.js'
import { keyOrAddress, noteProxyFields } from './keys.js'
import { type KeySource, resolveTrpcOptions, type TrpcCall, type TrpcRateLimitOptions } from './options.js'

/** The decision of an admitted call, as the procedure reads it: a `RateLimitResult` whose `settle` is always there. */
export interface AdmittedCall extends RateLimitResult {
  /** Charges what the call really cost once it ran (`settle(0)` gives it back), and the headers follow. */
  settle(actualCost: number): Promise<SettleResult>
}

/** What the middleware adds to the context of the procedures it admits. */
export interface RateLimitContext {
  /**
   * The decision: limit, remaining, reset, and `settle(actualCost)` to charge what the call really cost.
   * Undefined when the call was not limited (`skip`, an allow list, `enabled: false`), and when the store failed
   * and the failure policy let it pass: there is no quota to tell then (its `remaining` would read 0).
   */
  rateLimit: AdmittedCall | undefined
}

/** The middleware, for `t.procedure.use(...)` or `t.middleware(...)`, with a handle to forget a client's counters. */
// biome-ignore lint/suspicious/noExplicitAny: the app's context and meta types, as tRPC's own middleware types take them.
export interface RateLimitMiddleware<TContext = any, TMeta = any>
  extends TRPCMiddlewareFunction<TContext, TMeta, object, RateLimitContext, unknown> {
  /** Forgets `key` in every counter of this middleware (e.g. after a successful login). Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** For a server that goes: gives up this middleware's counters (a store you passed stays yours to close). */
  close(): void
}

/**
 * `rateLimit()`'s argument: optional when the context holds a Node request to read the address from (or is not
 * typed); else the options, with `key` or `clientIp` (see `KeySource`).
 */
export type RateLimitArguments<TContext, TMeta> =
  unknown extends KeySource<TContext, TMeta>
    ? [options?: TrpcRateLimitOptions<TContext, TMeta>]
    : [options: TrpcRateLimitOptions<TContext, TMeta> & KeySource<TContext, TMeta>]

const WHERE = 'rateLimit()'

/**
 * Limits procedure calls by the caller's key: each call (each call of a batch) is decided before the procedure
 * runs; a refused one is a `TRPCError` `TOO_MANY_REQUESTS` whose `cause` carries `retryAfter`.
 * @example
 * const limited = t.procedure.use(rateLimit({ limit: 100, window: '1m', key: ({ ctx }) => ctx.user.id }))
 */
// biome-ignore lint/suspicious/noExplicitAny: the app's context and meta types.
export function rateLimit<TContext = any, TMeta = any>(
  ...[options]: RateLimitArguments<TContext, TMeta>
): RateLimitMiddleware<TContext, TMeta> {
  const {
    engine: engineOptions,
    key,
    clientIp,
    trusted,
  } = resolveTrpcOptions<TContext, TMeta>(options ?? {}, WHERE)
  const keyed =
    key === undefined
      ? {}
      : { key: keyOrAddress(key, addressOf(clientIp, trusted, false, WHERE), engineOptions.ipv6Subnet) }
  const engine = new HttpRateLimiter<TrpcCall<TContext, TMeta>>(
    { ...engineOptions, ...keyed },
    trpcBinding(clientIp, trusted, key !== undefined, WHERE),
    { where: WHERE },
  )
  const middleware: TRPCMiddlewareFunction<TContext, TMeta, object, RateLimitContext, unknown> =
    async function rateLimitMiddleware(call) {
      // The middleware's arguments are the call (`next` aside); its context is the app's, as tRPC simplifies it.
      const decision = await engine.decide(call as unknown as TrpcCall<TContext, TMeta>)
      if (decision === undefined) return call.next()
      // The client left before its call was decided: nothing was counted, and nobody reads the answer.
      if (decision.gone) throw new TRPCError({ code: 'CLIENT_CLOSED_REQUEST' })
      writeHeaders(call, decision.headers)
      noteProxyFields(call as unknown as TrpcCall, decision.headers)
      if (!decision.result.allowed) throw refusalError(decision)
      // The failure policy let the call pass: the quota is unknown, so the procedure is told none.
      const policy = decision.result.source === 'policy'
      if (!policy) engine.followSettle(decision, call)
      const rateLimit = policy ? undefined : (decision.result as AdmittedCall)
      const run = () => call.next({ ctx: { rateLimit } })
      return decision.slot === undefined ? run() : holding(decision.slot, call.type, run)
    }
  return Object.assign(middleware, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}

/**
 * Runs the call (`run`, the middleware's `next`) holding its in-flight slot (option `concurrency`) until its
 * procedure is done: returned or thrown; a streamed result (an async iterable) once its stream ends or is
 * cancelled; a subscription once it started (its events are not charged).
 */
async function holding<T extends { ok: boolean; data?: unknown }>(
  slot: ConcurrencyResult,
  type: TrpcCall['type'],
  run: () => Promise<T>,
): Promise<T> {
  let result: T
  try {
    result = await run()
  } catch (error) {
    void slot.release() // a release never rejects (failures go to onError)
    throw error
  }
  if (type !== 'subscription' && result.ok && isAsyncIterable(result.data))
    return { ...result, data: releasedAtEnd(result.data, slot) } as T
  void slot.release()
  return result
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value

/** `parts` as they are sent, the slot given back when they end, fail or are cancelled. */
async function* releasedAtEnd(
  parts: AsyncIterable<unknown>,
  slot: ConcurrencyResult,
): AsyncGenerator<unknown> {
  try {
    yield* parts
  } finally {
    void slot.release()
  }
}
