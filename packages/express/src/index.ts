import {
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  type HttpRateLimitOptions,
  type RateLimitResult,
  type ResponseBody,
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

export interface ExpressRateLimitOptions extends HttpRateLimitOptions<Request> {
  /** Replaces the default 429 answer. Headers are already set; send a response or call `next`. */
  handler?: (
    request: Request,
    response: Response,
    next: NextFunction,
    result: ExpressHandlerResult,
  ) => void | Promise<void>
}

/** The middleware, with a handle to forget a client's counters (e.g. after a successful login). */
export interface RateLimitMiddleware extends RequestHandler {
  /** Forgets `key` in every counter of this middleware. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Forgets the key of `request` (as `key`, or the client IP, gives it). Rejects on a store error. */
  reset(request: Request): Promise<void>
  /**
   * Call when the app goes (a test that builds the app again, a reloaded module, shutdown): gives up this
   * middleware's counters to the limiter that replaces it, and closes the memory store it made for itself (a
   * `store` you passed stays open). Without it, a newer middleware on the same store and counters still takes
   * over, and this one warns once if it decides again (`RATEWINDOW_SUPERSEDED_LIMITER`).
   */
  close(): void
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
  route: routePattern,
  options: ['handler'],
  writeHeaders: (response, headers) => {
    const target = response as Response
    if (!target.headersSent) for (const name in headers) target.setHeader(name, headers[name]!)
  },
}

/** The route pattern of each route object (`request.route`), found on its first request. */
const patterns = new WeakMap<object, string>()

/**
 * The route's pattern for observer events and metric labels: never a value from the URL, which the client
 * chooses. Express keeps no mount pattern, only the matched path (`request.baseUrl`: `/t/acme` for a router
 * mounted at `/t/:tenant`), so the mount is included only where it holds no parameters, as found once per
 * route by walking the app's routers; otherwise the route's own pattern (`request.route.path`) stands alone.
 */
function routePattern(request: Request): string | undefined {
  const route = request.route as { path?: unknown } | undefined
  if (route?.path === undefined) return undefined
  let pattern = patterns.get(route)
  if (pattern === undefined) {
    const own = String(route.path)
    pattern = request.baseUrl !== '' && literalMount(request, route) ? `${request.baseUrl}${own}` : own
    patterns.set(route, pattern)
  }
  return pattern
}

interface RouterLayer {
  handle?: { stack?: unknown }
  route?: unknown
  /** Express 4: the parameters of the layer's path. */
  keys?: unknown
  /** Express 5 (router 2.3+): the path the layer was declared with. */
  rawPath?: unknown
}

/** Whether a path pattern (string) holds no parameter, wildcard, optional part or escape. */
const literalPath = (path: unknown) => typeof path === 'string' && !/[:*?(){}[\]\\]/.test(path)

/**
 * Whether `route` is reached through mounts that hold no parameters: the app's own mount path (sub-apps)
 * and every router on the one way from the app to the route. Unknown shapes count as parameters.
 */
function literalMount(request: Request, route: object): boolean {
  try {
    type Mounted = { parent?: Mounted; mountpath?: unknown }
    for (let app = request.app as Mounted; app.parent !== undefined; app = app.parent) {
      if (!literalPath(app.mountpath)) return false
    }
    const app = request.app as unknown as { _router?: { stack?: unknown }; router?: { stack?: unknown } }
    // Express 4 keeps its router in `_router` (its `app.router` throws); Express 5 in `app.router`.
    const root = app._router ?? app.router
    const ways: RouterLayer[][] = []
    findRoute(root?.stack, route, [], ways, 0)
    return ways.length === 1 && ways[0]!.every(literalLayer)
  } catch {
    return false
  }
}

function literalLayer(layer: RouterLayer): boolean {
  if (Array.isArray(layer.keys)) return layer.keys.length === 0
  return literalPath(layer.rawPath)
}

/** Every way (the router layers mounted on it) from `stack` down to the layer of `route`. */
function findRoute(stack: unknown, route: object, path: RouterLayer[], ways: RouterLayer[][], depth: number) {
  if (!Array.isArray(stack) || depth > 32 || ways.length > 1) return
  for (const layer of stack as RouterLayer[]) {
    if (layer.route === route) ways.push(path)
    else if (layer.handle !== undefined && Array.isArray(layer.handle.stack))
      findRoute(layer.handle.stack, route, [...path, layer], ways, depth + 1)
  }
}

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
        engine.followSettle(decision, response)
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
    close: () => engine.close(),
  })
}

export type { RateLimitObserver, RateLimitResult } from '@ratewindow/core'
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
export default rateLimit
