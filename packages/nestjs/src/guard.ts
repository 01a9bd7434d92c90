import { type CanActivate, type ExecutionContext, HttpException, type NestMiddleware } from '@nestjs/common'
import type { HttpDecision, HttpRateLimiter, RateLimitResult } from '@ratewindow/core'
import {
  type NestHttpRequest,
  type NestHttpResponse,
  type PlatformResponse,
  rawResponse,
  writeHeaders,
} from './binding.js'
import type { AppliedLimiter, RateWindowService } from './service.js'

/**
 * The refusal the guard throws (429, 403 for a deny-listed client, 503 when the failure policy refuses, or the
 * penalty's status), with the RateLimit and Retry-After headers already on the response: the app's exception
 * filters apply. Nest's default filter sends `getResponse()`: the default JSON body, or the problem details;
 * a `message` string is sent the way Nest sends a string exception, `{ statusCode, message }` (a filter of your
 * own can send `body` as it is, with `contentType`).
 */
export class RateLimitException extends HttpException {
  /** The decision, as `request.rateLimit`. */
  readonly result: RateLimitResult
  /** The body as the other adapters send it, and its content type. */
  readonly body: string
  readonly contentType: string

  constructor(result: RateLimitResult, statusCode: number, body: { contentType: string; payload: string }) {
    const json = !body.contentType.startsWith('text/')
    super(json ? JSON.parse(body.payload) : body.payload, statusCode)
    this.name = 'RateLimitException'
    this.result = result
    this.body = body.payload
    this.contentType = body.contentType
  }
}

/** What the guard keeps on a request: the decisions made, by engine (several guards count a request once). */
const DECISIONS = Symbol.for('ratewindow.nestjs.decisions')

type Marked = NestHttpRequest & { [DECISIONS]?: Map<HttpRateLimiter<NestHttpRequest>, HttpDecision> }

/**
 * The guard: every limiter that applies to the handler (the module's, `@RateLimit()`'s) decides in turn; the
 * first refusal throws `RateLimitException`. Global (`{ provide: APP_GUARD, useClass: RateWindowGuard }`) or per
 * controller or handler (`@UseGuards(RateWindowGuard)`). Contexts other than HTTP (GraphQL, WebSockets,
 * microservices) pass untouched.
 */
export class RateWindowGuard implements CanActivate {
  readonly #service: RateWindowService

  constructor(service: RateWindowService) {
    this.#service = service
  }

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    if (context.getType() !== 'http') return true
    const limiters = this.#service.limitersFor(context.getClass(), context.getHandler())
    if (limiters.length === 0) return true
    const http = context.switchToHttp()
    return run(http.getRequest<Marked>(), http.getResponse<PlatformResponse>(), limiters, 0)
  }
}

/** Decides with `limiters[from…]`; synchronous while every decision is (the memory store). */
function run(
  request: Marked,
  response: PlatformResponse,
  limiters: AppliedLimiter[],
  from: number,
): boolean | Promise<boolean> {
  let decisions = request[DECISIONS]
  if (decisions === undefined) {
    decisions = new Map()
    request[DECISIONS] = decisions
  }
  for (let i = from; i < limiters.length; i++) {
    const { engine } = limiters[i]!
    if (decisions.has(engine)) continue
    const decision = engine.decideNow(request)
    if (decision instanceof Promise) {
      return decision.then((each) => {
        const denial = answer(request, response, engine, each)
        return denial ?? run(request, response, limiters, i + 1)
      })
    }
    const denial = answer(request, response, engine, decision)
    if (denial !== undefined) return denial
  }
  return true
}

/** Writes one decision; a rejected promise (the exception) for a refusal, undefined when the request goes on. */
function answer(
  request: Marked,
  response: PlatformResponse,
  engine: HttpRateLimiter<NestHttpRequest>,
  decision: HttpDecision | undefined,
): Promise<never> | undefined {
  if (decision === undefined) return undefined
  request[DECISIONS]!.set(engine, decision)
  request.rateLimit = decision.result
  writeHeaders(response, decision.headers)
  if (decision.result.allowed) {
    engine.track(rawResponse(response), decision, undefined, request, response as NestHttpResponse)
    engine.followSettle(decision, response)
    return undefined
  }
  return engine.body(request, decision).then((body) => {
    // Problem details keep their type through Nest's filters (which send JSON as application/json otherwise).
    if (body.contentType.includes('problem+json'))
      writeHeaders(response, { 'Content-Type': body.contentType })
    throw new RateLimitException(decision.result, decision.statusCode, body)
  })
}

/**
 * The module's limiters as a middleware, for every request the app receives, 404s included (guards run only for
 * matched routes): `consumer.apply(RateWindowMiddleware).forRoutes('*')` in a module's `configure`. It knows no
 * handler, so `@RateLimit()` and `@SkipRateLimit()` do not apply; use it instead of the global guard, not with it
 * (on Fastify the middleware sees Node's request, the guard Fastify's: a request would count twice).
 */
export class RateWindowMiddleware implements NestMiddleware {
  readonly #service: RateWindowService

  constructor(service: RateWindowService) {
    this.#service = service
  }

  use(request: NestHttpRequest, response: unknown, next: (error?: unknown) => void): void | Promise<void> {
    const verdict = run(request, response as PlatformResponse, this.#service.moduleLimiters(), 0)
    if (verdict === true) return next()
    // A refusal rejects with the RateLimitException, which Nest passes to the app's exception filters.
    return Promise.resolve(verdict).then(() => next())
  }
}
