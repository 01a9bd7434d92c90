import type { HttpRateLimitOptions, LimiterOverrides, RateLimitResult } from '@ratewindow/core'
import { type HttpDecision, HttpRateLimiter } from '@ratewindow/core/adapter'
import type { Context, Middleware, Next } from 'koa'
import { binding } from './binding.js'

declare module 'koa' {
  interface DefaultState {
    /** The rate limit decision for this request, set by `@ratewindow/koa`. */
    rateLimit?: RateLimitResult
  }
}

/**
 * `rateLimit()` options: callbacks receive `ctx`; `requestWasSuccessful` takes `(statusCode)`, or
 * `(ctx, ctx.response)` when it declares two parameters.
 */
export interface KoaRateLimitOptions extends HttpRateLimitOptions<Context, Context['response']> {
  /** Replaces the default 429 answer. Headers are already set; set `ctx.status` and `ctx.body`. */
  handler?: (ctx: Context, result: RateLimitResult) => void | Promise<void>
}

/** The middleware, with a handle to forget a client's counters (e.g. after a successful login). */
export interface RateLimitMiddleware extends Middleware {
  /** Forgets `key` in every counter of this middleware. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Forgets the key of `ctx` (as `key`, or the client IP, gives it). Rejects on a store error. */
  reset(ctx: Context): Promise<void>
  /**
   * Operating one key's limits live (docs/operating-limits.md): overrides and manual blocks (with
   * `overrides: true`), `give`, `take` and `inspect`.
   */
  readonly overrides: LimiterOverrides
  /**
   * Call when the app goes (a test that builds the app again, a reloaded module, shutdown): gives up this
   * middleware's counters to the limiter that replaces it, and closes the memory store it made for itself (a
   * `store` you passed stays open). Without it, a newer middleware on the same store and counters still takes
   * over, and this one warns once if it decides again (`RATEWINDOW_SUPERSEDED_LIMITER`).
   */
  close(): void
}

/**
 * Koa middleware: `app.use(rateLimit({ limit: 100, window: '1m' }))`. Over the limit it answers without
 * calling `next()`.
 */
export function rateLimit(options: KoaRateLimitOptions = {}): RateLimitMiddleware {
  const engine = new HttpRateLimiter(options, binding)
  const { handler } = options

  async function deny(ctx: Context, decision: HttpDecision) {
    if (handler && decision.result.source !== 'deny-list') return handler(ctx, decision.result)
    const { contentType, payload } = await engine.body(ctx, decision)
    ctx.status = decision.statusCode
    ctx.type = contentType
    ctx.body = payload
  }

  function answer(ctx: Context, next: Next, decision: HttpDecision | undefined): Promise<unknown> {
    if (decision === undefined) return next()
    // The client left before the decision: nothing to answer (Koa writes nothing to a closed connection).
    if (decision.gone) return Promise.resolve()
    ctx.state.rateLimit = decision.result
    // Through the response itself: `ctx.set` is a delegate that forwards `arguments` (measurable per request).
    const { response } = ctx
    const { headers } = decision
    for (const name in headers) response.set(name, headers[name]!)
    if (decision.result.allowed) {
      engine.track(ctx.res, decision, undefined, ctx, response)
      engine.followSettle(decision, ctx)
      if (decision.slot === undefined) return next()
      // The in-flight slot is free when the rest of the chain returned (or threw), not when the client leaves.
      const work = next()
      const done = () => engine.handlerDone(decision)
      work.then(done, done)
      return work
    }
    return deny(ctx, decision)
  }

  // Not an async function: with the memory store the decision is made synchronously, and the middleware
  // returns `next()` itself. Koa turns a throw into a rejection.
  const middleware = function rateLimitMiddleware(ctx: Context, next: Next): Promise<unknown> {
    const decision = engine.decideNow(ctx)
    return decision instanceof Promise
      ? decision.then((each) => answer(ctx, next, each))
      : answer(ctx, next, decision)
  }
  return Object.defineProperty(
    Object.assign(middleware, {
      resetKey: (key: string) => engine.resetKey(key),
      reset: (ctx: Context) => engine.reset(ctx),
      close: () => engine.close(),
    }),
    'overrides',
    { get: () => engine.overrides, enumerable: true },
  ) as RateLimitMiddleware
}

export type { RateLimitObserver, RateLimitResult, SlowDownInfo, Store } from '@ratewindow/core'
export {
  AccessList,
  ConcurrencyLimiter,
  combineObservers,
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimitError,
  RedisStore,
  SyncedStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export { type KoaSlowDownOptions, type SlowDownMiddleware, slowDown } from './slow-down.js'
export default rateLimit
