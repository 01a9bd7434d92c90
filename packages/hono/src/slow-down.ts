import type { SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import {
  INVALID_ADDRESS,
  SlowDownEngine,
  type SlowDownRefusal,
  unlessInvalidAddress,
} from '@ratewindow/core/adapter'
import type { Context, Env, MiddlewareHandler } from 'hono'
import {
  ADDRESS_NAMES,
  addressSource,
  deferOf,
  type HonoAddressOptions,
  handlerResponse,
  honoBinding,
  INVALID_ADDRESS_ANSWER,
  invalidAddressResponse,
  withHandlerResponse,
} from './binding.js'

/** The variables `slowDown()` sets: `c.get('slowDown')` (undefined when the request was skipped). */
export interface SlowDownVariables {
  /** What `slowDown()` decided for this request, set by `@ratewindow/hono`. */
  slowDown?: SlowDownInfo
}

/** The Hono `Env` of `slowDown()`: `new Hono<SlowDownEnv>()` types `c.get('slowDown')`. */
export interface SlowDownEnv {
  Variables: SlowDownVariables
}

/**
 * express-slow-down 2's options, on ratewindow's stores; callbacks take `(c)` (`delayMs` takes `(used, c)`).
 * The client address comes from `getConnInfo` or `clientIp` (or give a `keyGenerator`), as for `rateLimit()`.
 */
// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env, as Hono's own middleware types take.
export interface HonoSlowDownOptions<E extends Env = any>
  extends SlowDownOptions<[Context<E>], Response>,
    HonoAddressOptions<E> {}

/** The middleware, with a handle to forget a client's count. */
export interface SlowDownMiddleware extends MiddlewareHandler<SlowDownEnv> {
  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Call when the app goes: gives up the counters, and closes the memory store made for itself. */
  close(): void
}

/**
 * Hono middleware (Node, Bun, Deno, Workers) that delays instead of refusing (express-slow-down 2's model): every request
 * is counted in `windowMs`; those after the first `delayAfter` wait `delayMs`, at most `maxDelayMs`, before
 * `next()`. `c.get('slowDown')` holds `limit`, `used`, `remaining`, `resetTime` and `delay`. No RateLimit headers
 * are sent. A client that leaves while delayed (the request's abort signal) is dropped: `next()` never runs.
 * Past `maxPerKey` (10) or `maxWaiting` (1000) delayed requests waiting at once, one more is answered 429 without
 * `next()`. Refunds after the response go through `executionCtx.waitUntil` where there is one (Workers).
 */
// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env.
export function slowDown<E extends Env = any>(options: HonoSlowDownOptions<E> = {}): SlowDownMiddleware {
  const clientIp = addressSource(options, options.keyGenerator !== undefined, 'keyGenerator')
  const binding = honoBinding<E>(
    clientIp,
    options,
    ADDRESS_NAMES,
    'pass `trustProxy` to slowDown() (the number of proxies in front of the app, or their addresses)',
  )
  const engine = new SlowDownEngine<Context<E>, [Context<E>], Response>(
    withHandlerResponse(options),
    binding,
    ADDRESS_NAMES,
  )

  const middleware: MiddlewareHandler<SlowDownEnv> = async (c, next) => {
    const context = c as unknown as Context<E>
    const args: [Context<E>] = [context]
    const pending = unlessInvalidAddress(engine.decide(context, args), INVALID_ADDRESS_ANSWER)
    const decided = pending instanceof Promise ? await pending : pending
    if (decided === INVALID_ADDRESS) return invalidAddressResponse(c)
    if (decided === undefined) {
      await next()
      return
    }
    c.set('slowDown', decided.info)
    const answer = (refusal: SlowDownRefusal) => {
      c.header('Content-Type', refusal.contentType)
      return c.body(refusal.payload, refusal.statusCode, refusal.headers)
    }
    if (decided.refusal !== undefined) return answer(decided.refusal)
    const response = handlerResponse(c)
    // true: on to `next()`; false: the client left; a refusal: refused at the end of its delay (a stalled connection).
    const admitted = await new Promise<boolean | SlowDownRefusal>((resolve) =>
      engine.proceed(
        decided,
        args,
        response,
        (late) => resolve(late ?? true),
        () => resolve(false),
        deferOf(c),
      ),
    )
    // The client left while delayed: nothing runs for it, and nobody reads this answer.
    if (admitted === false) return new Response(null, { status: 499 })
    if (admitted !== true) return answer(admitted)
    try {
      await next()
    } finally {
      response.finish()
    }
  }
  return Object.assign(middleware, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}
