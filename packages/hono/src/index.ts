import type { HttpRateLimitOptions, RateLimitResult, TrustProxy } from '@ratewindow/core'
import {
  followedBody,
  type HttpDecision,
  HttpRateLimiter,
  INVALID_ADDRESS,
  type MiddlewareHandles,
  unlessInvalidAddress,
  withHandles,
} from '@ratewindow/core/adapter'
import type { Context, Env, MiddlewareHandler } from 'hono'
import {
  ADDRESS_NAMES,
  addressSource,
  deferOf,
  type GetConnInfo,
  handlerResponse,
  honoBinding,
  INVALID_ADDRESS_ANSWER,
  invalidAddressResponse,
  withHandlerResponse,
} from './binding.js'

export type { GetConnInfo } from './binding.js'

/** The variables the middleware sets: `c.get('rateLimit')` (undefined when the request was skipped). */
export interface RateLimitVariables {
  /** The rate limit decision for this request, set by `@ratewindow/hono`. */
  rateLimit?: RateLimitResult
}

/** The Hono `Env` of the middleware: `new Hono<RateLimitEnv>()` types `c.get('rateLimit')` everywhere. */
export interface RateLimitEnv {
  Variables: RateLimitVariables
}

/**
 * `rateLimit()` options: callbacks receive `c`; `requestWasSuccessful` takes `(statusCode)`, or `(c, res)` when it
 * declares two parameters (`res`: the `Response` the handler returned, `c.res`). `E` types `c` in every callback:
 * `rateLimit<Env>({ key: (c) => c.get('jwtPayload').sub })`.
 */
// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env, as Hono's own middleware types take.
export interface HonoRateLimitOptions<E extends Env = any>
  extends HttpRateLimitOptions<Context<E>, Response> {
  /**
   * The runtime's connection info helper (`getConnInfo` from `@hono/node-server/conninfo`, `hono/bun`,
   * `hono/deno`, `hono/cloudflare-workers`): the client address is its `remote.address`. This, `clientIp` or
   * `key` is required: Hono itself does not know the client's address.
   */
  getConnInfo?: GetConnInfo
  /** The client address, by your own means (instead of `getConnInfo`). Not with `trustProxy`. */
  clientIp?: (c: Context<E>) => string | undefined
  /**
   * Use `X-Forwarded-For` from the proxies in front of the app: their number (`1` for one load balancer), or
   * their addresses and networks (`'10.0.0.0/8'`, `['127.0.0.1', '::1']`). Never set it without a proxy that
   * sets the header: any client could then choose its own key. Needs `getConnInfo`. @default none
   */
  trustProxy?: TrustProxy
  /**
   * For tests with Hono's `app.request()` (no connection): a request whose `getConnInfo` finds none is keyed as
   * one client, `::`, with one warning, instead of failing with `ERR_RATEWINDOW_NO_CONNECTION_INFO`. Never in
   * production (every client would share that key); in tests a `key` function is better. Needs `getConnInfo`.
   * @default false
   */
  allowNoConnection?: boolean
  /** Replaces the default 429 answer: return the response. Headers are already set (`c.header`). */
  handler?: (c: Context<E>, result: RateLimitResult) => Response | Promise<Response>
}

/** The middleware, with its handles: `resetKey`, `reset`, `operator`, `close`. */
// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env.
export type RateLimitMiddleware = MiddlewareHandler<RateLimitEnv> & MiddlewareHandles<Context<any>>

/**
 * Hono middleware (Node, Bun, Deno): `app.use(rateLimit({ limit: 100, window: '1m', getConnInfo }))`, or per
 * route. Options are validated here, at construction. The result is on `c.get('rateLimit')`.
 */
// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env.
export function rateLimit<E extends Env = any>(options: HonoRateLimitOptions<E> = {}): RateLimitMiddleware {
  const clientIp = addressSource(options, options.key !== undefined, 'key')
  const { handler } = options
  const binding = honoBinding<E>(clientIp, options, ['handler', ...ADDRESS_NAMES])
  const engine = new HttpRateLimiter(withHandlerResponse(options), binding)
  const tracks =
    engine.holdsSlots || options.skipFailedRequests === true || options.skipSuccessfulRequests === true

  async function deny(c: Context<E>, decision: HttpDecision): Promise<Response> {
    if (handler && decision.result.source !== 'deny-list') return handler(c, decision.result)
    const { contentType, payload } = await engine.body(c, decision)
    c.header('Content-Type', contentType)
    return c.body(payload, decision.statusCode as 429)
  }

  const middleware: MiddlewareHandler<RateLimitEnv> = async (c, next) => {
    const context = c as unknown as Context<E>
    const pending = unlessInvalidAddress(engine.decideNow(context), INVALID_ADDRESS_ANSWER)
    const decision = pending instanceof Promise ? await pending : pending
    if (decision === INVALID_ADDRESS) return invalidAddressResponse(c)
    if (decision === undefined) {
      await next()
      return
    }
    // The client left before the decision: an empty answer, which nobody receives; nothing else runs for it.
    if (decision.gone) return c.body(null, decision.statusCode as 429)
    c.set('rateLimit', decision.result)
    const { headers } = decision
    let first: string | undefined
    for (const name in headers) {
      first ??= name
      c.header(name, headers[name])
    }
    if (!decision.result.allowed) return deny(context, decision)
    engine.followSettle(decision, context)
    const response = tracks ? handlerResponse(c) : undefined
    if (response !== undefined) engine.track(response, decision, deferOf(c), context)
    let sending = false
    try {
      await next()
      // A streamed body is the handler's work going on: its slot is held until the body is sent.
      if (response !== undefined && engine.holdsSlots) {
        const body = followedBody(c.res.body, c.req.method, c.res.status, response)
        if (body !== undefined) {
          sending = true
          c.res = new Response(body, c.res)
        }
      }
    } finally {
      if (!sending) response?.finish()
    }
    // A handler that returned a Response of its own (`new Response(...)`) dropped the prepared headers.
    if (first !== undefined && !c.res.headers.has(first)) {
      for (const name in headers) if (!c.res.headers.has(name)) c.header(name, headers[name])
    }
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
export type { HonoAddressOptions } from './binding.js'
export {
  type HonoSlowDownOptions,
  type SlowDownEnv,
  type SlowDownMiddleware,
  type SlowDownVariables,
  slowDown,
} from './slow-down.js'
export default rateLimit
