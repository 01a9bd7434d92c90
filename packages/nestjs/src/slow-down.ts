import type { ServerResponse } from 'node:http'
import type { SlowDownOptions } from '@ratewindow/core'
import {
  connectionStalled,
  type FrameworkBinding,
  type ReceivedMessage,
  type SlowDownDecision,
  SlowDownEngine,
  type SlowDownRefusal,
} from '@ratewindow/core/adapter'
import { bindingOf, type NestHttpRequest } from './binding.js'

/**
 * express-slow-down 2's options, on ratewindow's stores: callbacks take `(req, res)`, the arguments of a Nest
 * middleware (`delayMs` takes `(used, req, res)`): Express's on `@nestjs/platform-express`, Node's on
 * `@nestjs/platform-fastify`.
 */
export type NestSlowDownOptions = SlowDownOptions<[NestHttpRequest, ServerResponse]>

/** The middleware, with a handle to forget a client's count. */
export interface SlowDownMiddleware {
  (request: NestHttpRequest, response: ServerResponse, next: (error?: unknown) => void): void | Promise<void>
  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Call when the app goes: gives up the counters, and closes the memory store made for itself. */
  close(): void
}

const EXPRESS = bindingOf('express')
const FASTIFY = bindingOf('fastify')

/**
 * Which platform a middleware's request comes from: Express's request has its app (`req.app`, on its prototype);
 * on platform-fastify a Nest middleware gets Node's request (middie), which has none.
 */
const platformOf = (request: NestHttpRequest): FrameworkBinding<NestHttpRequest> =>
  typeof request.app?.get === 'function' ? EXPRESS : FASTIFY

/**
 * The two platforms' bindings, chosen per request: the client address, the trust-proxy checks and the client's
 * leaving (its socket's `close`) are each platform's own. The warnings' hints name both platforms' settings.
 */
const nestMiddlewareBinding: FrameworkBinding<NestHttpRequest> = {
  name: 'NestJS',
  clientIp: (request) => platformOf(request).clientIp(request),
  untrustedForwardedFor: (request) => platformOf(request).untrustedForwardedFor(request),
  trustProxyHint: `on platform-express, ${EXPRESS.trustProxyHint}; on platform-fastify, ${FASTIFY.trustProxyHint}`,
  permissiveTrustProxy: (request) => platformOf(request).permissiveTrustProxy?.(request) ?? false,
  permissiveTrustProxyHint: `On platform-express: ${EXPRESS.permissiveTrustProxyHint} On platform-fastify: ${FASTIFY.permissiveTrustProxyHint}`,
  route: (request) => platformOf(request).route?.(request),
  onClose: (request, listener) => platformOf(request).onClose!(request, listener),
  // Node's request on both platforms (middie hands Node's to a Nest middleware).
  stalled: (request) => connectionStalled(request as ReceivedMessage),
}

/**
 * A Nest middleware that delays instead of refusing (express-slow-down 2's model): every request is counted in
 * `windowMs`; those after the first `delayAfter` wait `delayMs`, at most `maxDelayMs`.
 * `consumer.apply(slowDown({ ... })).forRoutes('*')` in a module's `configure`, on either platform (each request's
 * platform is recognised: Express's request, or Node's on platform-fastify). The info (`limit`, `used`,
 * `remaining`, `resetTime`, `delay`, `key`) is on the middleware's request: `req.slowDown` on platform-express,
 * `request.raw.slowDown` in a handler on platform-fastify. No RateLimit headers are sent. A client that leaves
 * while delayed is dropped: `next()` is never called, so the handler never runs. Past `maxPerKey` (10) or
 * `maxWaiting` (1000) delayed requests waiting at once, one more is answered 429 without `next()`. A callback's
 * error goes to the app's exception filters.
 * @example consumer.apply(slowDown({ windowMs: 15 * 60 * 1000, delayAfter: 5, delayMs: 500 })).forRoutes('*')
 */
export function slowDown(options: NestSlowDownOptions = {}): SlowDownMiddleware {
  const engine = new SlowDownEngine<NestHttpRequest, [NestHttpRequest, ServerResponse]>(
    options,
    nestMiddlewareBinding,
  )

  // A lowercase function, not a class: Nest wraps it as a functional middleware and awaits what it returns, so
  // that a rejection reaches the app's exception filters on both platforms.
  const middleware = function slowDownMiddleware(
    request: NestHttpRequest,
    response: ServerResponse,
    next: (error?: unknown) => void,
  ): void | Promise<void> {
    const args: [NestHttpRequest, ServerResponse] = [request, response]
    const go = (decided: SlowDownDecision<NestHttpRequest> | undefined) => {
      if (decided === undefined) {
        next()
        return
      }
      request.slowDown = decided.info
      if (decided.refusal !== undefined) refuse(response, decided.refusal)
      else
        engine.proceed(decided, args, response, (late) =>
          late === undefined ? next() : refuse(response, late),
        )
    }
    const decided = engine.decide(request, args)
    if (decided instanceof Promise) return decided.then(go)
    go(decided)
  }
  return Object.assign(middleware, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}

/**
 * Answers a request refused past the bounds on delayed requests, or at the end of its delay on a stalled
 * connection, on Node's response (both platforms).
 */
function refuse(
  response: ServerResponse,
  { statusCode, headers, contentType, payload }: SlowDownRefusal,
): void {
  response.statusCode = statusCode
  for (const name in headers) response.setHeader(name, headers[name]!)
  response.setHeader('Content-Type', contentType)
  response.end(payload)
}
