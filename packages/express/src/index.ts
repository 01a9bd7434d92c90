import {
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  type HttpRateLimitOptions,
  type RateLimitResult,
} from '@ratewindow/core'
import type { NextFunction, Request, RequestHandler, Response } from 'express'

declare global {
  namespace Express {
    interface Request {
      /** The rate limit decision for this request, set by `@ratewindow/express`. */
      rateLimit?: RateLimitResult
    }
  }
}

export interface ExpressRateLimitOptions extends HttpRateLimitOptions<Request> {
  /** Replaces the default 429 answer. Headers are already set; send a response or call `next`. */
  handler?: (
    request: Request,
    response: Response,
    next: NextFunction,
    result: RateLimitResult,
  ) => void | Promise<void>
}

/** The middleware, with a handle to forget a client's counters (e.g. after a successful login). */
export interface RateLimitMiddleware extends RequestHandler {
  /** Forgets `key` in every counter of this middleware. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Forgets the key of `request` (as `key`, or the client IP, gives it). Rejects on a store error. */
  reset(request: Request): Promise<void>
}

const binding: FrameworkBinding<Request> = {
  name: 'Express',
  clientIp: (request) => request.ip ?? request.socket.remoteAddress,
  untrustedForwardedFor: (request) =>
    request.headers['x-forwarded-for'] === undefined ? undefined : !request.app.get('trust proxy'),
  trustProxyHint: "call app.set('trust proxy', <number of proxies or their addresses>)",
  permissiveTrustProxy: (request) => request.app.get('trust proxy') === true,
  permissiveTrustProxyHint:
    "Set app.set('trust proxy', 1) (the number of proxies in front of the app) or their addresses, e.g. 'loopback'.",
  // Known when the limiter is a route's own middleware (`app.get('/users/:id', limiter, handler)`).
  route: (request) =>
    request.route?.path === undefined ? undefined : `${request.baseUrl}${request.route.path}`,
  options: ['handler'],
}

/**
 * Express middleware (Express 4 and 5): `app.use(rateLimit({ limit: 100, window: '1m' }))`, or per route.
 * Options are validated here, at construction.
 */
export function rateLimit(options: ExpressRateLimitOptions = {}): RateLimitMiddleware {
  const engine = new HttpRateLimiter(options, binding)
  const { handler } = options

  async function deny(request: Request, response: Response, next: NextFunction, decision: HttpDecision) {
    if (handler && decision.result.source !== 'deny-list') {
      return await handler(request, response, next, decision.result)
    }
    const { contentType, payload } = await engine.body(request, decision)
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
      request.rateLimit = decision.result
      if (response.headersSent) {
        if (decision.result.allowed) engine.track(response, decision)
        next()
        return
      }
      const { headers } = decision
      for (const name in headers) response.setHeader(name, headers[name]!)
      if (decision.result.allowed) {
        engine.track(response, decision)
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
  return Object.assign(middleware, {
    resetKey: (key: string) => engine.resetKey(key),
    reset: (request: Request) => engine.reset(request),
  })
}

export type { RateLimitResult } from '@ratewindow/core'
export {
  AccessList,
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimitError,
  RedisStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export default rateLimit
