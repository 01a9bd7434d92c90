import { type CanActivate, type ExecutionContext, HttpException, type NestMiddleware } from '@nestjs/common'
import type { RateLimitResult } from '@ratewindow/core'
import type { HttpDecision, HttpRateLimiter } from '@ratewindow/core/adapter'
import {
  type NestHttpRequest,
  type NestHttpResponse,
  type PlatformResponse,
  rawResponse,
  writeHeaders,
} from './binding.js'
import { GraphQLRateLimitError, graphqlCall } from './graphql-context.js'
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

type Marks = { [DECISIONS]?: Map<HttpRateLimiter<NestHttpRequest>, HttpDecision> }

/** What one run of the limiters acts on: the HTTP request and response, and where its decisions are marked. */
interface Target {
  request: NestHttpRequest
  response: PlatformResponse
  /** The request (HTTP), or the resolver call's `info` (GraphQL: each field resolution decides). */
  marks: object
  graphql: boolean
}

/**
 * The guard: every limiter that applies to the handler (the module's, `@RateLimit()`'s) decides in turn; the
 * first refusal throws `RateLimitException`. Global (`{ provide: APP_GUARD, useClass: RateWindowGuard }`) or per
 * controller or handler (`@UseGuards(RateWindowGuard)`). GraphQL resolver calls with the module's
 * `graphql: true` (each call one decision; a refusal a `GraphQLRateLimitError`); other contexts (GraphQL without
 * it, WebSockets, microservices) pass untouched.
 */
export class RateWindowGuard implements CanActivate {
  readonly #service: RateWindowService

  constructor(service: RateWindowService) {
    this.#service = service
  }

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    const type = context.getType<string>()
    if (type !== 'http' && (type !== 'graphql' || !this.#service.graphql)) return true
    const limiters = this.#service.limitersFor(context.getClass(), context.getHandler())
    if (limiters.length === 0) return true
    if (type === 'graphql') {
      const call = graphqlCall(context)
      if (call === undefined) return true
      return run({ ...call, marks: call.resolution, graphql: true }, limiters, 0)
    }
    const http = context.switchToHttp()
    const request = http.getRequest<NestHttpRequest>()
    return run({ request, response: http.getResponse(), marks: request, graphql: false }, limiters, 0)
  }
}

/** Decides with `limiters[from…]`; synchronous while every decision is (the memory store). */
function run(target: Target, limiters: AppliedLimiter[], from: number): boolean | Promise<boolean> {
  const marks = target.marks as Marks
  let decisions = marks[DECISIONS]
  if (decisions === undefined) {
    decisions = new Map()
    marks[DECISIONS] = decisions
  }
  for (let i = from; i < limiters.length; i++) {
    const { engine } = limiters[i]!
    if (decisions.has(engine)) continue
    const decision = engine.decideNow(target.request)
    if (decision instanceof Promise) {
      return decision.then((each) => {
        const denial = answer(target, engine, each)
        return denial ?? run(target, limiters, i + 1)
      })
    }
    const denial = answer(target, engine, decision)
    if (denial !== undefined) return denial
  }
  return true
}

/** Writes one decision; a rejected promise (the exception) for a refusal, undefined when the request goes on. */
function answer(
  { request, response, marks, graphql }: Target,
  engine: HttpRateLimiter<NestHttpRequest>,
  decision: HttpDecision | undefined,
): Promise<never> | undefined {
  if (decision === undefined) return undefined
  ;(marks as Marks)[DECISIONS]!.set(engine, decision)
  request.rateLimit = decision.result
  writeHeaders(response, decision.headers)
  if (decision.result.allowed) {
    engine.track(rawResponse(response), decision, undefined, request, response as NestHttpResponse)
    engine.followSettle(decision, response)
    return undefined
  }
  if (graphql) return Promise.reject(new GraphQLRateLimitError(decision.result))
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
    const target = { request, response: response as PlatformResponse, marks: request, graphql: false }
    const verdict = run(target, this.#service.moduleLimiters(), 0)
    if (verdict === true) return next()
    // A refusal rejects with the RateLimitException, which Nest passes to the app's exception filters.
    return Promise.resolve(verdict).then(() => next())
  }
}
