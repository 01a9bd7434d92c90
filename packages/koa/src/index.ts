import type { HttpRateLimitOptions, RateLimitResult } from '@ratewindow/core'
import {
  type FieldWriter,
  type HttpDecision,
  HttpRateLimiter,
  type MiddlewareHandles,
  showFields,
  withHandles,
} from '@ratewindow/core/adapter'
import type { Context, Middleware, Next } from 'koa'
import { binding } from './binding.js'

/**
 * Whose RateLimit fields answer a request that several limiters limit (app-wide and a route's): core's
 * `showFields`, the fewest requests left or the refusing limiter's, never two quotas that contradict each other.
 * Through the response itself: `ctx.set` is a delegate that forwards `arguments` (measurable per request).
 */
const RESPONSE_FIELDS: FieldWriter<Context['response']> = {
  set: (response, name, value) => response.set(name, value),
  remove: (response, name) => response.remove(name),
}

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

/** The middleware, with its handles: `resetKey`, `reset`, `operator`, `close`. */
export type RateLimitMiddleware = Middleware & MiddlewareHandles<Context>

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
    const { response } = ctx
    const shown = showFields(ctx, decision, RESPONSE_FIELDS, response)
    if (decision.result.allowed) {
      engine.track(ctx.res, decision, undefined, ctx, response)
      if (shown) engine.followSettle(decision, ctx)
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
  return withHandles(middleware, engine)
}

export type { RateLimitObserver, RateLimitResult, SlowDownInfo, Store } from '@ratewindow/core'
export {
  AccessList,
  ConcurrencyLimiter,
  combineObservers,
  fixedWindow,
  gcra,
  MemoryStore,
  quota,
  RateLimitError,
  RedisStore,
  SyncedStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export { type KoaSlowDownOptions, type SlowDownMiddleware, slowDown } from './slow-down.js'
export default rateLimit
