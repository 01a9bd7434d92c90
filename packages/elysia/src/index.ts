import type { HttpRateLimitOptions, RateLimitResult } from '@ratewindow/core'
import {
  type FetchResponse,
  type HttpDecision,
  HttpRateLimiter,
  INVALID_ADDRESS,
  type MiddlewareHandles,
  unlessInvalidAddress,
  withHandles,
} from '@ratewindow/core/adapter'
import { Elysia, status } from 'elysia'
import {
  ADDRESS_NAMES,
  type ElysiaAddressOptions,
  elysiaBinding,
  handlerResponse,
  INVALID_ADDRESS_ANSWER,
  invalidAddressAnswer,
  outcomeHooks,
  pluginSeed,
  type RateLimitContext,
  type ScopedPlugin,
} from './binding.js'

/**
 * `rateLimit()` options: callbacks receive the Elysia context (`RateLimitContext`); a two-parameter
 * `requestWasSuccessful` gets `(ctx, undefined)` and reads the status from its first argument's `set`.
 */
export interface ElysiaRateLimitOptions
  extends HttpRateLimitOptions<RateLimitContext, Response>,
    ElysiaAddressOptions {
  /**
   * Replaces the default 429 answer: return what Elysia should send (a `Response`, a string, an object).
   * The RateLimit headers and Retry-After are already on `ctx.set.headers`, and the status on `ctx.set.status`.
   */
  handler?: (ctx: RateLimitContext, result: RateLimitResult) => unknown
}

/**
 * `rateLimit()` with its handles (`resetKey`, `reset`, `operator`, `close`): an Elysia plugin whose routes have
 * `rateLimit` in their context.
 */
export type RateLimitPlugin = ScopedPlugin<{ readonly rateLimit: RateLimitResult | undefined }> &
  MiddlewareHandles<RateLimitContext>

/**
 * The Elysia plugin (Bun, and Node with `@elysiajs/node`): `app.use(rateLimit({ limit: 100, window: '1m' }))`
 * limits the routes registered after it, on that instance and the plugins it uses after it (Elysia's `scoped`);
 * inside a `group` or `guard`, those routes only. Options are validated here, at construction. The decision is
 * `ctx.rateLimit` (undefined when the request was skipped). The client is the connection's address; behind
 * proxies, `trustProxy`.
 */
export function rateLimit(options: ElysiaRateLimitOptions = {}): RateLimitPlugin {
  const engine = new HttpRateLimiter<RateLimitContext, Response>(
    options,
    elysiaBinding(options, ['handler', ...ADDRESS_NAMES]),
  )
  return withHandles(rateLimitPlugin(engine, options), engine)
}

function rateLimitPlugin(
  engine: HttpRateLimiter<RateLimitContext, Response>,
  options: ElysiaRateLimitOptions,
) {
  const { handler } = options
  const tracks =
    engine.holdsSlots || options.skipFailedRequests === true || options.skipSuccessfulRequests === true
  /** The responses `onAfterResponse` finishes: admitted requests whose outcome or slot the engine watches. */
  const tracked = new WeakMap<Request, FetchResponse>()

  async function deny(ctx: RateLimitContext, decision: HttpDecision) {
    if (handler && decision.result.source !== 'deny-list')
      return status(decision.statusCode, await handler(ctx, decision.result))
    const { contentType, payload } = await engine.body(ctx, decision)
    // A Response, whose content type Elysia keeps on every adapter (a string's is `text/plain` on Node's).
    return status(decision.statusCode, new Response(payload, { headers: { 'content-type': contentType } }))
  }

  // NOTE: each hook names the fields of the context it reads in its parameters and takes the whole context, for
  // the callbacks, as `arguments[0]`: Elysia reads a hook's parameters to choose what to parse for the routes it
  // covers, and a context passed on whole would have it parse the body, query and cookies of every route.
  const plugin = new Elysia({ name: '@ratewindow/elysia', seed: pluginSeed() })
    .derive(
      { as: 'scoped' },
      // biome-ignore lint/correctness/noUnusedFunctionParameters: named for Elysia's inference, read through `ctx`.
      async function rateLimitDecision({ request, server, set, route, path }) {
        // biome-ignore lint/complexity/noArguments: a parameter would have Elysia parse every field.
        const ctx = arguments[0] as RateLimitContext
        const decision = await unlessInvalidAddress(engine.decideNow(ctx), INVALID_ADDRESS_ANSWER)
        if (decision === INVALID_ADDRESS) return invalidAddressAnswer()
        // Skipped: the decision of a limiter that ran before this one, if any, stays in the context.
        if (decision === undefined) return { rateLimit: (ctx as { rateLimit?: RateLimitResult }).rateLimit }
        // The client left before the decision: an empty answer, which nobody receives; nothing else runs for it.
        if (decision.gone) return status(decision.statusCode)
        Object.assign(set.headers, decision.headers)
        if (!decision.result.allowed) return deny(ctx, decision)
        engine.followSettle(decision, ctx)
        if (tracks) {
          const response = handlerResponse(request)
          tracked.set(request, response)
          engine.track(response, decision, undefined, ctx)
        }
        return { rateLimit: decision.result as RateLimitResult | undefined }
      },
    )
    .onStop(() => engine.close())
  if (tracks) {
    const outcome = outcomeHooks(tracked)
    plugin
      .onAfterHandle({ as: 'scoped' }, outcome.afterHandle)
      .onAfterResponse({ as: 'scoped' }, outcome.afterResponse)
      .onError({ as: 'scoped' }, outcome.error)
  }
  // The decision's type alone: the answers the hook may give (429, 500) are not a route's declared responses.
  return plugin as unknown as ScopedPlugin<{ readonly rateLimit: RateLimitResult | undefined }>
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
export type { ElysiaAddressOptions, RateLimitContext } from './binding.js'
export { type ElysiaSlowDownOptions, type SlowDownPlugin, slowDown } from './slow-down.js'
export default rateLimit
