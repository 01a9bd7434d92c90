import {
  type HttpRateLimitOptions,
  MemoryStore,
  RateLimitError,
  type RateLimitResult,
} from '@ratewindow/core'
import {
  type EnginePlacement,
  type FieldWriter,
  type HttpDecision,
  HttpRateLimiter,
  showFields,
} from '@ratewindow/core/adapter'
import { invalid, type PeerOptionName } from '@ratewindow/core/support'
import type {
  FastifyInstance,
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  onRequestHookHandler,
  onSendHookHandler,
  preHandlerHookHandler,
  RouteOptions,
} from 'fastify'
import fp from 'fastify-plugin'
import { binding } from './binding.js'
import { GeneratedRoutes } from './generated-routes.js'
import { Handle, type RateLimitHandle } from './handle.js'
import { countsApart } from './shared-budget.js'

/** Whose RateLimit fields answer a request several registrations limit: core's `showFields`, on a reply. */
const REPLY_FIELDS: FieldWriter<FastifyReply> = {
  set: (reply, name, value) => reply.header(name, value),
  remove: (reply, name) => reply.removeHeader(name),
}

/**
 * Plugin and route options: callbacks receive the request; `requestWasSuccessful` takes `(statusCode)`, or
 * `(request, reply)` when it declares two parameters.
 */
export interface FastifyRateLimitOptions extends HttpRateLimitOptions<FastifyRequest, FastifyReply> {
  /** Replaces the default 429 answer. Headers are already set; send the reply. */
  handler?: (request: FastifyRequest, reply: FastifyReply, result: RateLimitResult) => void | Promise<void>
  /** Limit every route (`false`: only routes with `config.ratewindow`). Plugin option only. @default true */
  global?: boolean
  /**
   * Limit the not-found handlers of this context (Fastify's default 404 and `setNotFoundHandler`) with these
   * options, as any route; `false` leaves 404s unlimited (`config: { ratewindow: false }` given to
   * `setNotFoundHandler` exempts that handler alone). Plugin option only. @default the value of `global`
   */
  notFound?: boolean
  /**
   * When the limit is checked: `'onRequest'` (before anything else, the cheapest) or `'preHandler'` (after
   * authentication hooks, so that `key`, `limit` and `cost` can read what they set). @default 'onRequest'
   */
  hook?: 'onRequest' | 'preHandler'
}

/**
 * Names `config.ratewindow` refuses at compile time: the peers' option names (`max`, `timeWindow`, …) and the
 * plugin-only `global` and `notFound`. Fastify widens a route's `config` type by the literal it is given, so that unknown names
 * compile; these at least are type errors (every unknown name is still refused at registration).
 */
type RefusedRouteNames = { readonly [Name in PeerOptionName | 'global' | 'notFound']?: never }

/**
 * Per-route settings in `config.ratewindow`, merged over the plugin's options. A route's `rules` replaces an
 * inherited `limit`/`window`/`algorithm`, and a route's `limit`/`window`/`algorithm` replaces inherited
 * `rules`. A route that sets `limit`, `window`, `algorithm`, `rules`, `key`, `prefix`, `group`, `store`,
 * `ipv6Subnet` or `name` gets a limiter of its own, counting apart (its route), unless it names a `group`; any other
 * route (only `cost`, `skip`, response options, …) counts in the plugin's budget, its `cost` spending it.
 */
export type RouteRateLimitOptions = Omit<FastifyRateLimitOptions, 'global' | 'notFound'> & RefusedRouteNames

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Reset handle of `@ratewindow/fastify` (not `fastify.rateLimit`, which @fastify/rate-limit decorates).
     */
    ratewindow: RateLimitHandle
  }
  interface FastifyRequest {
    /** The rate limit decision for this request, set by `@ratewindow/fastify`. */
    rateLimit: RateLimitResult | null
  }
  interface FastifyContextConfig {
    /**
     * This route's `@ratewindow/fastify` options, or `false` to exempt it. Its own key, so that
     * `@fastify/rate-limit` (which reads `config.rateLimit`) can be installed alongside.
     */
    ratewindow?: RouteRateLimitOptions | false
  }
}

const SHAPE_OPTIONS = ['limit', 'window', 'algorithm'] as const
const HOOKS = ['onRequest', 'preHandler'] as const

/** The route's options over the plugin's: `rules` and `limit`/`window`/`algorithm` replace each other. */
function mergeRouteOptions(
  plugin: RouteRateLimitOptions,
  route: RouteRateLimitOptions,
): RouteRateLimitOptions & Record<string, unknown> {
  const inherited: Record<string, unknown> = { ...plugin }
  if (route.rules !== undefined) for (const name of SHAPE_OPTIONS) delete inherited[name]
  if (SHAPE_OPTIONS.some((name) => route[name] !== undefined)) delete inherited.rules
  return { ...inherited, ...route }
}

interface Limiter {
  hook: 'onRequest' | 'preHandler'
  run: onRequestHookHandler
  /** With `concurrency`: marks the handler's reply as sent, for the in-flight slot's release. */
  sent: onSendHookHandler | undefined
  engine: HttpRateLimiter<FastifyRequest, FastifyReply>
}

/** `placement`: where the engine sits (its route's qualifier, or the plugin's engine as `owner`: its budget). */
function makeLimiter(
  options: RouteRateLimitOptions,
  placement: EnginePlacement & { where: string },
): Limiter {
  const { hook = 'onRequest' } = options
  if (!HOOKS.includes(hook)) {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'hook', hook, "'onRequest' or 'preHandler'")
  }
  const engine = new HttpRateLimiter(options, binding, placement)
  const { handler } = options
  // One mark per limiter: several registrations all apply, each counting a request once.
  const counted = Symbol('ratewindow.counted')
  // The decision of a request holding an in-flight slot of this limiter (option `concurrency`).
  const holding = Symbol('ratewindow.holding')

  /** Writes the decision; a promise while a denial is being answered, undefined when the request goes on. */
  function answer(
    request: FastifyRequest,
    reply: FastifyReply,
    decision: HttpDecision | undefined,
  ): Promise<unknown> | undefined {
    if (decision === undefined) return undefined
    request.rateLimit = decision.result
    // Another registration's fields may be the ones to show (shown-fields.ts).
    const shown = showFields(request, decision, REPLY_FIELDS, reply)
    if (decision.result.allowed) {
      engine.track(reply.raw, decision, undefined, request, reply)
      if (decision.slot !== undefined)
        (request as FastifyRequest & { [holding]?: HttpDecision })[holding] = decision
      if (shown) engine.followSettle(decision, reply)
      return undefined
    }
    return deny(request, reply, decision)
  }

  async function deny(request: FastifyRequest, reply: FastifyReply, decision: HttpDecision) {
    // The client left before the decision: an empty answer, which nobody receives; nothing else runs for it.
    if (decision.gone) return reply.code(decision.statusCode).send()
    if (handler && decision.result.source !== 'deny-list') return handler(request, reply, decision.result)
    const { contentType, payload } = await engine.body(request, decision)
    return reply.code(decision.statusCode).type(contentType).send(payload)
  }

  function finish(
    request: FastifyRequest,
    reply: FastifyReply,
    decision: HttpDecision | undefined,
    done: HookHandlerDoneFunction,
  ): void {
    let denial: Promise<unknown> | undefined
    try {
      denial = answer(request, reply, decision)
    } catch (error) {
      done(error as Error)
      return
    }
    if (denial === undefined) done()
    // After a reply was sent, Fastify runs nothing more for the request.
    else denial.then(() => done(), done)
  }

  // A callback hook, not an async one: with the memory store the decision is made synchronously, and the
  // request goes on without a promise (docs/benchmarks.md).
  const run: onRequestHookHandler = function rateLimitHook(request, reply, done) {
    const marked = request as FastifyRequest & { [counted]?: true }
    if (marked[counted]) return done()
    marked[counted] = true
    const decision = engine.decideNow(request)
    if (decision instanceof Promise) {
      decision.then((each) => finish(request, reply, each, done), done)
    } else finish(request, reply, decision, done)
  }
  // The reply is sent: the handler's work is done. The slot is free when the response finishes (onResponse),
  // or, with the client gone before, now: Fastify sends no onResponse for an aborted request.
  const sent: onSendHookHandler | undefined = engine.holdsSlots
    ? function rateLimitSent(request, _reply, payload, done) {
        const decision = (request as FastifyRequest & { [holding]?: HttpDecision })[holding]
        if (decision !== undefined) engine.handlerEnded(decision)
        done(null, payload)
      }
    : undefined
  return { hook, run, sent, engine }
}

const plugin: FastifyPluginAsync<FastifyRateLimitOptions> = async (fastify, options) => {
  const { global = true, notFound = global, ...shared } = options ?? {}
  for (const [name, value] of [
    ['global', global],
    ['notFound', notFound],
  ] as const) {
    if (typeof value !== 'boolean') {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, value, 'true or false')
    }
  }
  // The plugin's store, made here when not given: the routes that count in its budget reach it too (and it is
  // closed with the server, as an engine closes the store it made for itself).
  const ownStore = shared.store === undefined ? new MemoryStore() : undefined
  const store = shared.store ?? ownStore!
  // Built now, so that bad options fail at registration.
  const globalLimiter = makeLimiter({ ...shared, store }, { where: 'rateLimit plugin' })
  const engines = [globalLimiter.engine]
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', null)
  // One handle per server, on its root instance, whatever the order of registrations: a child context that
  // registers first must not get a handle of its own, and the root has one even when only children register.
  const root = rootOf(fastify)
  if (!root.hasDecorator('ratewindow')) root.decorate('ratewindow', new Handle())
  const decorated = fastify.ratewindow
  if (!(decorated instanceof Handle)) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      '`fastify.ratewindow` is already decorated by something other than @ratewindow/fastify.',
      { option: 'ratewindow' },
    )
  }
  const handle = decorated
  handle.engines.set(globalLimiter.engine, { route: undefined, registration: fastify, name: shared.name })
  /** The limiter of a route the application declares: the plugin's, one of its own, or none (exempt). */
  function limiterOf(instance: FastifyInstance, route: RouteOptions): Limiter | undefined {
    const routeConfig = route.config as { ratewindow?: unknown; rateLimit?: unknown } | undefined
    const methods = Array.isArray(route.method) ? route.method.join(',') : route.method
    const scope = `${methods} ${route.url}`
    // `config.rateLimit` was this plugin's key in 0.1: without @fastify/rate-limit to read it, a route
    // that sets it would run unlimited (or with the plugin's limit) without a word.
    if (routeConfig?.rateLimit !== undefined && !instance.hasPlugin('@fastify/rate-limit')) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_UNKNOWN_OPTION',
        `\`config.rateLimit\` of ${scope} is @fastify/rate-limit's key; @ratewindow/fastify reads ` +
          '`config.ratewindow`: rename `config.rateLimit` to `config.ratewindow`.',
        { option: 'config.rateLimit' },
      )
    }
    const config = routeConfig?.ratewindow
    if (config === false || (config === undefined && !global)) return undefined
    if (config === undefined) return globalLimiter
    if (typeof config !== 'object' || config === null) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `\`config.ratewindow\` of ${scope} must be an object of options or false.`,
        { option: 'config.ratewindow' },
      )
    }
    const where = `config.ratewindow of ${scope}`
    const merged = mergeRouteOptions(shared, config as RouteRateLimitOptions)
    let limiter: Limiter
    if (countsApart(config)) {
      // Its own counters, on the plugin's store unless it names one: the members of a `group` meet there.
      limiter = makeLimiter({ ...merged, store: merged.store ?? store }, { qualifier: scope, where })
      handle.engines.set(limiter.engine, { route: scope, registration: fastify, name: merged.name })
    } else {
      // The plugin's budget: its counters (no route qualifier), its cost and options this route's own; one
      // more engine of the plugin's (`owner`), not a newer limiter taking its counters over.
      limiter = makeLimiter({ ...merged, store }, { where, owner: globalLimiter.engine })
      handle.sharedRoutes.add({ route: scope, registration: fastify })
    }
    engines.push(limiter.engine)
    return limiter
  }
  // The routes Fastify generates from a declared one (its HEAD twin, …) count in the declared route's limiter.
  const generated = new GeneratedRoutes<Limiter | undefined>()
  fastify.addHook('onRoute', function onRoute(route) {
    const source = generated.sourceOf(route)
    const limiter = source === undefined ? limiterOf(this, route) : source.given
    if (source === undefined) generated.declare(route, limiter)
    if (limiter !== undefined) addHooks(route, limiter)
  })
  if (notFound) limitNotFound(fastify, globalLimiter)
  fastify.addHook('onClose', async () => {
    for (const engine of engines) {
      engine.close()
      handle.engines.delete(engine)
    }
    for (const each of handle.sharedRoutes)
      if (each.registration === fastify) handle.sharedRoutes.delete(each)
    ownStore?.close()
  })
}

/** Adds the hooks of `limiter` to `route`: onRequest first, before any work; preHandler last, after every hook that authenticates. */
function addHooks(route: RouteOptions, limiter: Limiter): void {
  const existing = route[limiter.hook]
  const hooks = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing]
  route[limiter.hook] = limiter.hook === 'onRequest' ? [limiter.run, ...hooks] : [...hooks, limiter.run]
  if (limiter.sent !== undefined) {
    const onSend = route.onSend
    route.onSend = [...(onSend === undefined ? [] : Array.isArray(onSend) ? onSend : [onSend]), limiter.sent]
  }
}

/**
 * The server's root instance: Fastify makes each child context with `Object.create(parent)`, so the root is the
 * last instance on the prototype chain, and what is decorated there every context sees.
 */
function rootOf(fastify: FastifyInstance): FastifyInstance {
  let root = fastify
  for (
    let parent: unknown = Object.getPrototypeOf(root);
    typeof (parent as Partial<FastifyInstance> | null)?.decorate === 'function' &&
    (parent as FastifyInstance).server === fastify.server;
    parent = Object.getPrototypeOf(root)
  ) {
    root = parent as FastifyInstance
  }
  return root
}

/**
 * Limits the not-found handlers of `fastify`'s context (onRoute never sees them): its hooks run for its 404s,
 * and for its routes too, which they leave to the routes' own hooks.
 */
function limitNotFound(fastify: FastifyInstance, limiter: Limiter): void {
  const exempt = (request: FastifyRequest) =>
    !request.is404 ||
    (request.routeOptions?.config as { ratewindow?: unknown } | undefined)?.ratewindow === false
  const { run, sent } = limiter
  const limitIt: onRequestHookHandler = function limitNotFound(request, reply, done) {
    if (exempt(request)) done()
    else run.call(this, request, reply, done)
  }
  if (limiter.hook === 'onRequest') fastify.addHook('onRequest', limitIt)
  else fastify.addHook('preHandler', limitIt as unknown as preHandlerHookHandler)
  if (sent !== undefined) {
    fastify.addHook('onSend', function notFoundSent(request, reply, payload, done) {
      if (exempt(request)) done(null, payload)
      else sent.call(this, request, reply, payload, done)
    })
  }
}

/**
 * Fastify plugin (Fastify 4 and 5): `await app.register(rateLimit, { limit: 100, window: '1m' })`, with
 * per-route `config: { ratewindow: { ... } | false }`. Register it before the routes it should limit; every
 * registration applies.
 */
export const rateLimit = fp(plugin, { fastify: '4.x || 5.x', name: '@ratewindow/fastify' })

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
export type { RateLimitHandle, ResetScope } from './handle.js'
export { type FastifySlowDownOptions, type SlowDownHook, slowDown } from './slow-down.js'
export default rateLimit
