import type { HttpRateLimitOptions, RateLimitResult, ResponseBody } from '@ratewindow/core'
import {
  type FieldWriter,
  type HttpDecision,
  HttpRateLimiter,
  type MiddlewareHandles,
  showFields,
  withHandles,
} from '@ratewindow/core/adapter'
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import { binding } from './binding.js'

/**
 * Whose RateLimit fields answer a request that several limiters limit (app-wide and a route's): core's
 * `showFields`, the fewest requests left or the refusing limiter's, never two quotas that contradict each other.
 */
const RESPONSE_FIELDS: FieldWriter<Response> = {
  set: (response, name, value) => response.setHeader(name, value),
  remove: (response, name) => response.removeHeader(name),
}

declare global {
  namespace Express {
    interface Request {
      /** The rate limit decision for this request, set by `@ratewindow/express`. */
      rateLimit?: RateLimitResult
    }
  }
}

/**
 * The 4th argument of `handler`: the decision, with what express-rate-limit's options carry that its handlers
 * use (`statusCode`, `message`, `limit`, `windowMs`), so that a handler written for express-rate-limit, such as
 * `(req, res, next, options) => res.status(options.statusCode).send(options.message)`, works as it is.
 */
export interface ExpressHandlerResult extends RateLimitResult {
  /** The status of the default answer: 429 (`statusCode`), `penalty.statusCode` while blocked, 503 on failure. */
  statusCode: number
  /** The body of the default answer: the `message` option's value, or the default JSON as an object. */
  message: ResponseBody
  /** The reported rule's window, ms (`limit` is the reported rule's limit). */
  windowMs: number
}

/**
 * `rateLimit()` options. `requestWasSuccessful` takes `(statusCode)`, or express-rate-limit's `(req, res)` when
 * it declares two parameters.
 */
export interface ExpressRateLimitOptions extends HttpRateLimitOptions<Request, Response> {
  /**
   * Replaces the default 429 answer. Headers are already set; send a response or call `next`. What it returns is
   * ignored (awaited when a promise): express-rate-limit's `(req, res, next, options) =>
   * res.status(options.statusCode).send(options.message)` fits as it is.
   */
  handler?: (
    request: Request,
    response: Response,
    next: NextFunction,
    result: ExpressHandlerResult,
  ) => unknown
}

/** The middleware, with its handles: `resetKey`, `reset`, `operator`, `close`. */
export type RateLimitMiddleware = RequestHandler & MiddlewareHandles<Request>

/**
 * Express middleware (Express 4 and 5): `app.use(rateLimit({ limit: 100, window: '1m' }))`, or per route.
 * Options are validated here, at construction.
 */
export function rateLimit(options: ExpressRateLimitOptions = {}): RateLimitMiddleware {
  const engine = new HttpRateLimiter(options, binding)
  const { handler } = options

  async function deny(request: Request, response: Response, next: NextFunction, decision: HttpDecision) {
    const { contentType, payload } = await engine.body(request, decision)
    if (handler && decision.result.source !== 'deny-list') {
      const { result, statusCode } = decision
      const message: ResponseBody = contentType.startsWith('text/plain') ? payload : JSON.parse(payload)
      return await handler(request, response, next, {
        ...result,
        statusCode,
        message,
        windowMs: result.rule.windowMs,
      })
    }
    response.status(decision.statusCode).type(contentType).send(payload)
  }

  function answer(
    request: Request,
    response: Response,
    next: NextFunction,
    decision: HttpDecision | undefined,
  ): void {
    try {
      if (decision === undefined) {
        next()
        return
      }
      // The client left before the decision: nothing to answer, and nothing runs for it.
      if (decision.gone) return
      request.rateLimit = decision.result
      if (response.headersSent) {
        if (decision.result.allowed) engine.track(response, decision, undefined, request, response)
        next()
        return
      }
      const shown = showFields(response, decision, RESPONSE_FIELDS, response)
      if (decision.result.allowed) {
        engine.track(response, decision, undefined, request, response)
        if (shown) engine.followSettle(decision, response)
        next()
        return
      }
      deny(request, response, next, decision).catch(next)
    } catch (error) {
      next(error)
    }
  }

  // Not an async function: with the memory store the decision is made synchronously, without a promise.
  const middleware: RequestHandler = function rateLimitMiddleware(request, response, next) {
    const decision = engine.decideNow(request)
    if (decision instanceof Promise) {
      decision.then((each) => answer(request, response, next, each), next)
    } else answer(request, response, next, decision)
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
export { type ExpressSlowDownOptions, type SlowDownMiddleware, slowDown } from './slow-down.js'
export default rateLimit
