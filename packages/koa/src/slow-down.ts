import type { Awaitable, SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import { type SlowDownDecision, SlowDownEngine, type SlowDownRefusal } from '@ratewindow/core/adapter'
import type { Context, Middleware, Next } from 'koa'
import { binding } from './binding.js'

declare module 'koa' {
  interface DefaultState {
    /** What `slowDown()` decided for this request, set by `@ratewindow/koa`. */
    slowDown?: SlowDownInfo
  }
}

/**
 * express-slow-down 2's options, on ratewindow's stores; callbacks take `(ctx)` (`delayMs` takes `(used, ctx)`),
 * but a two-parameter `requestWasSuccessful` takes `(ctx, ctx.response)`, as `rateLimit()`'s.
 */
export type KoaSlowDownOptions = SlowDownOptions<[Context], Context['response']>

/** The middleware, with a handle to forget a client's count. */
export interface SlowDownMiddleware extends Middleware {
  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Call when the app goes: gives up the counters, and closes the memory store made for itself. */
  close(): void
}

/**
 * Koa middleware that delays instead of refusing (express-slow-down 2's model): every request is counted in
 * `windowMs`; those after the first `delayAfter` wait `delayMs`, at most `maxDelayMs`, before `next()`.
 * `ctx.state.slowDown` holds `limit`, `used`, `remaining`, `resetTime` and `delay`. No RateLimit headers are
 * sent. A client that leaves while delayed is dropped: `next()` is never called. Past `maxPerKey` (10) or
 * `maxWaiting` (1000) delayed requests waiting at once, one more is answered 429 without `next()`.
 */
export function slowDown(options: KoaSlowDownOptions = {}): SlowDownMiddleware {
  const engine = new SlowDownEngine<Context, [Context], Context['response']>(withResponse(options), binding)

  function go(ctx: Context, next: Next, decided: SlowDownDecision<Context> | undefined): Promise<unknown> {
    if (decided === undefined) return next()
    ctx.state.slowDown = decided.info
    if (decided.refusal !== undefined) {
      answer(ctx, decided.refusal)
      return Promise.resolve()
    }
    if (decided.info.delay <= 0) {
      // No delay: `proceed` calls on at once, and the chain's own promise is returned.
      let work: Promise<unknown> | undefined
      engine.proceed(decided, [ctx], ctx.res, () => {
        work = next()
      })
      return work!
    }
    return new Promise((resolve, reject) => {
      engine.proceed(
        decided,
        [ctx],
        ctx.res,
        (late) => {
          // Refused at the end of its delay (a stalled connection), or on down the chain.
          if (late === undefined) next().then(resolve, reject)
          else resolve(answer(ctx, late))
        },
        () => resolve(undefined),
      )
    })
  }

  // Not an async function: with the memory store the decision is made synchronously. Koa turns a throw into
  // a rejection.
  const middleware = function slowDownMiddleware(ctx: Context, next: Next): Promise<unknown> {
    const decided = engine.decide(ctx, [ctx])
    return decided instanceof Promise ? decided.then((each) => go(ctx, next, each)) : go(ctx, next, decided)
  }
  return Object.assign(middleware, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}

/**
 * Answers a request refused past the bounds on delayed requests, or at the end of its delay on a stalled
 * connection: 429, Retry-After, the default body.
 */
function answer(ctx: Context, { statusCode, headers, contentType, payload }: SlowDownRefusal): void {
  ctx.status = statusCode
  ctx.set(headers)
  ctx.type = contentType
  ctx.body = payload
}

/** A two-parameter `requestWasSuccessful` gets `(ctx, ctx.response)`, as `rateLimit()`'s (callbacks get `ctx` alone). */
function withResponse(options: KoaSlowDownOptions): KoaSlowDownOptions {
  const check = options.requestWasSuccessful
  if (typeof check !== 'function' || check.length < 2) return options
  const byResponse = check as (ctx: Context, response: Context['response']) => Awaitable<boolean>
  return { ...options, requestWasSuccessful: (ctx, _response) => byResponse(ctx, ctx.response) }
}
