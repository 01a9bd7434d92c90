/**
 * The handles every middleware carries (Express, Koa, Hono …), written once: an adapter's `rateLimit()` returns
 * its middleware function `withHandles(middleware, engine)`.
 */
import type { LimiterOperator } from '../operator/operator.js'
import type { HttpRateLimiter } from './engine.js'

/** What a middleware carries besides being one. */
export interface MiddlewareHandles<Req> {
  /** Forgets `key` in every counter of this middleware (e.g. after a successful login). Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Forgets the key of `request` (as `key`, or the client IP, gives it). Rejects on a store error. */
  reset(request: Req): Promise<void>
  /**
   * Operating one key's limits live (docs/operating-limits.md): overrides and manual blocks (with `overrides:
   * true`), `give`, `take`, `inspect` and `top`.
   */
  readonly operator: LimiterOperator
  /** @deprecated `operator`: the same handle; this name stays until 1.0. */
  readonly overrides: LimiterOperator
  /**
   * Call when the app goes (a test that builds the app again, a reloaded module, shutdown): gives up this
   * middleware's counters to the limiter that replaces it, and closes the memory store it made for itself (a
   * `store` you passed stays open). Without it, a newer middleware on the same store and counters still takes
   * over, and this one warns once if it decides again (`RATEWINDOW_SUPERSEDED_LIMITER`).
   */
  close(): void
}

/** `middleware` with the handles of `engine` attached (the function itself is returned, not a wrapper). */
export function withHandles<F extends object, Req>(
  middleware: F,
  engine: HttpRateLimiter<Req, never>,
): F & MiddlewareHandles<Req> {
  const handles = {
    resetKey: (key: string) => engine.resetKey(key),
    reset: (request: Req) => engine.reset(request),
    close: () => engine.close(),
  }
  return Object.defineProperties(Object.assign(middleware, handles), {
    operator: { get: () => engine.operator, enumerable: true },
    overrides: { get: () => engine.operator, enumerable: false },
  }) as F & MiddlewareHandles<Req>
}

/**
 * Which of an app's limiters a reset (or `operator(scope)`) reaches, where an adapter keeps several (Fastify's
 * registrations and routes, Nest's named limiters); every field given must match, and without a scope a reset
 * reaches every limiter. A scope that matches no limiter rejects: a typo never resets nothing quietly.
 */
export interface ResetScope<Registration = never> {
  /** The limiters with this `name` option (a Fastify route's limiter inherits its registration's). */
  name?: string
  /**
   * Fastify: one route's own limiter (a route whose `config.ratewindow` sets its rules or its key), `'POST /login'`
   * (method and URL as registered), or `'/login'` for that URL under any method.
   */
  route?: string
  /** Fastify: the limiters of one registration, the instance `register(rateLimit, …)` was called on. */
  registration?: Registration
}
