import {
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  type HttpRateLimitOptions,
  type RateLimitResult,
} from '@ratewindow/core'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'

export interface FastifyRateLimitOptions extends HttpRateLimitOptions<FastifyRequest> {
  /** Replaces the default 429 answer. Headers are already set; send the reply. */
  handler?: (request: FastifyRequest, reply: FastifyReply, result: RateLimitResult) => void | Promise<void>
  /** Limit every route (`false`: only routes with `config.rateLimit`). Plugin option only. @default true */
  global?: boolean
}

/** Per-route settings in `config.rateLimit`: they override the plugin's options for that route. */
export type RouteRateLimitOptions = Omit<FastifyRateLimitOptions, 'global'>

declare module 'fastify' {
  interface FastifyRequest {
    /** The rate limit decision for this request, set by `@ratewindow/fastify`. */
    rateLimit: RateLimitResult | null
  }
  interface FastifyContextConfig {
    /** This route's rate limit options, or `false` to exempt it. */
    rateLimit?: RouteRateLimitOptions | false
  }
}

const binding: FrameworkBinding<FastifyRequest> = {
  name: 'Fastify',
  clientIp: (request) => request.ip || request.raw.socket.remoteAddress,
  // Fastify does not expose `trustProxy` after construction; without it, request.ip is the socket address.
  untrustedForwardedFor: (request) =>
    request.headers['x-forwarded-for'] !== undefined && request.ip === request.raw.socket.remoteAddress,
  trustProxyHint: 'create the server with Fastify({ trustProxy: <number of proxies or their addresses> })',
}

/** Marks a request already limited, so that nested registrations never count it twice. */
const counted = Symbol('ratewindow.counted')

function hook(options: FastifyRateLimitOptions): onRequestHookHandler {
  const engine = new HttpRateLimiter(options, binding)
  const { handler } = options
  return async function rateLimitHook(request, reply) {
    const marked = request as FastifyRequest & { [counted]?: true }
    if (marked[counted]) return
    marked[counted] = true
    const decision: HttpDecision | undefined = await engine.decide(request)
    if (decision === undefined) return
    request.rateLimit = decision.result
    reply.headers(decision.headers)
    if (decision.result.allowed) return engine.track(reply.raw, decision)
    if (handler) return handler(request, reply, decision.result)
    const { contentType, payload } = await engine.body(request, decision)
    return reply.code(decision.statusCode).type(contentType).send(payload)
  }
}

const plugin: FastifyPluginAsync<FastifyRateLimitOptions> = async (fastify, options) => {
  const { global = true, ...shared } = options
  // Build the global hook now, so that bad options fail at registration.
  const globalHook = hook(shared)
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', null)
  fastify.addHook('onRoute', (route) => {
    const config = (route.config as { rateLimit?: RouteRateLimitOptions | false } | undefined)?.rateLimit
    if (config === false || (config === undefined && !global)) return
    const limit = config === undefined ? globalHook : hook({ ...shared, ...config })
    const existing = route.onRequest
    route.onRequest =
      existing === undefined ? [limit] : [limit, ...(Array.isArray(existing) ? existing : [existing])]
  })
}

/**
 * Fastify plugin (Fastify 4 and 5): `await app.register(rateLimit, { limit: 100, window: '1m' })`, with
 * per-route `config: { rateLimit: { ... } | false }`. Register it before the routes it should limit.
 */
export const rateLimit = fp(plugin, { fastify: '4.x || 5.x', name: '@ratewindow/fastify' })

export type { RateLimitResult } from '@ratewindow/core'
export {
  fixedWindow,
  MemoryStore,
  RateLimitError,
  RedisStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export default rateLimit
