import { ALGORITHMS } from './algorithms/index.js'
import type { AlgorithmName, Rule } from './algorithms/types.js'
import type { Duration } from './duration.js'
import { invalid, RateLimitError, requireObject } from './errors.js'
import { type HeaderFormat, partitionKey, rateLimitHeaders, toSeconds } from './headers.js'
import { ipKey, parseIpv6Subnet } from './keys.js'
import { RateLimiter, type RateLimiterOptions } from './limiter.js'
import { checkOptions, parseRules } from './options.js'
import type { RateLimitResult } from './result.js'
import { MemoryStore } from './stores/memory.js'

type Awaitable<T> = T | Promise<T>
export type ResponseBody = string | Record<string, unknown>

/** Middleware options: the same names and meanings in the Express, Koa and Fastify adapters. */
export interface HttpRateLimitOptions<Req>
  extends Pick<
    RateLimiterOptions,
    | 'store'
    | 'prefix'
    | 'timeout'
    | 'onStoreError'
    | 'fallback'
    | 'onError'
    | 'circuitBreaker'
    | 'blockedCache'
  > {
  /** Requests per `window`, or a function of the request (e.g. by plan). Ignored with `rules`. @default 100 */
  limit?: number | ((request: Req) => Awaitable<number>)
  /** The window: ms or `'30s'`, `'1m'`, `'1h'`… Ignored with `rules`. @default '1m' */
  window?: Duration
  /** The algorithm for `limit` and `window`. @default 'sliding-window-counter' */
  algorithm?: AlgorithmName
  /** Explicit rules instead of `limit`/`window`/`algorithm`, e.g. `[tokenBucket(...), fixedWindow(...)]`. */
  rules?: Rule | readonly Rule[]
  /** The client identifier. @default the client IP (framework trust-proxy rules apply), IPv6 masked to `ipv6Subnet` */
  key?: (request: Req) => Awaitable<string>
  /** IPv6 prefix length the default key groups clients by; `false` for full addresses. @default 56 */
  ipv6Subnet?: number | false
  /** Requests for which this returns true are not limited and not counted. */
  skip?: (request: Req) => Awaitable<boolean>
  /** What a request costs: whole units. @default 1 */
  cost?: number | ((request: Req) => Awaitable<number>)
  /** RateLimit header style, or `false` for none. @default 'draft-6' */
  headers?: HeaderFormat | false
  /** Also send `X-RateLimit-Limit/Remaining/Reset`. @default false */
  legacyHeaders?: boolean
  /** Secret for the draft-8/-11 partition key (`pk`): an HMAC of the key, never the bare key. @default none */
  partitionKeySecret?: string
  /** Status of a denied request. @default 429 */
  statusCode?: number
  /** Body of a denied request: a string (text/plain), an object (JSON), or a function of the request. */
  message?: ResponseBody | ((request: Req, result: RateLimitResult) => Awaitable<ResponseBody>)
  /** Answer denials with an RFC 9457 `application/problem+json` body (the "quota-exceeded" type). @default false */
  problemDetails?: boolean
  /** Give the request back when its response fails (status >= 400, or the connection closed first). @default false */
  skipFailedRequests?: boolean
  /** Give the request back when its response succeeds. @default false */
  skipSuccessfulRequests?: boolean
  /** What counts as success for the two options above. @default status < 400 */
  requestWasSuccessful?: (statusCode: number) => boolean
}

/** What an adapter tells the engine about its framework. */
export interface FrameworkBinding<Req> {
  /** Framework name, for messages. */
  name: string
  /** The client address as the framework sees it (after its trust-proxy rules). */
  clientIp(request: Req): string | undefined
  /** Whether the request carries `X-Forwarded-For` although the framework does not trust proxies. */
  untrustedForwardedFor(request: Req): boolean
  /** How to enable trust-proxy in this framework, for the warning. */
  trustProxyHint: string
}

/**
 * The part of Node's `http.ServerResponse` that `track` uses, written out so that core's published types need no
 * `@types/node`: a `ServerResponse` (Express `res`, Koa `ctx.res`, Fastify `reply.raw`) fits it.
 */
export interface TrackedResponse {
  readonly statusCode: number
  readonly writableFinished: boolean
  once(event: 'finish' | 'close', listener: () => void): unknown
}

/** A decision in HTTP terms: what to send. Plain data; `body` and `track` are methods of the engine. */
export interface HttpDecision {
  result: RateLimitResult
  /** Headers to set on the response, allowed or not. */
  headers: Record<string, string>
  /** The status of a denial (429, or 503 when the failure policy denied). */
  statusCode: number
  /** @internal The limiter that decided (the one to refund through). */
  limiter: RateLimiter
}

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
const MAX_DYNAMIC_LIMITS = 1_000

/**
 * The framework-neutral middleware engine: options are parsed and validated once, here; adapters only read
 * the request, call `decide`, and write what it returns.
 */
export class HttpRateLimiter<Req> {
  readonly #options: HttpRateLimitOptions<Req>
  readonly #binding: FrameworkBinding<Req>
  readonly #base: Omit<RateLimiterOptions, 'rules'>
  readonly #limiters = new Map<number, RateLimiter>()
  readonly #fixed: RateLimiter | undefined
  readonly #makeRule: ((limit: number) => Rule) | undefined
  readonly #ipv6Subnet: number | false
  #warnedUntrustedProxy = false

  constructor(options: HttpRateLimitOptions<Req> = {}, binding: FrameworkBinding<Req>) {
    requireObject(options, 'options', '{ limit: 100, window: "1m" }')
    this.#options = options
    this.#binding = binding
    checkOptions(options)
    this.#ipv6Subnet = parseIpv6Subnet(options.ipv6Subnet)
    const {
      store = new MemoryStore(),
      prefix,
      timeout,
      onStoreError,
      fallback,
      onError,
      circuitBreaker,
      blockedCache,
    } = options
    this.#base = { store, prefix, timeout, onStoreError, fallback, onError, circuitBreaker, blockedCache }
    if (options.rules !== undefined) {
      this.#fixed = new RateLimiter({ ...this.#base, rules: parseRules(options.rules) })
    } else {
      const algorithm = options.algorithm ?? 'sliding-window-counter'
      const window = options.window ?? '1m'
      const make = ALGORITHMS[algorithm].fromLimit
      this.#makeRule = (limit) => make(limit, window)
      const limit = options.limit ?? 100
      // Built now even for a function limit, so that a bad `window` fails at construction.
      const probe = this.#limiterFor(typeof limit === 'number' ? limit : 1)
      this.#fixed = typeof limit === 'number' ? probe : undefined
    }
    if (typeof options.cost === 'number' && this.#fixed && options.cost > this.#fixed.maxCost) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
        `\`cost\` ${options.cost} exceeds the limit (${this.#fixed.maxCost}): no request could ever pass. Lower the cost or raise the limit.`,
        { option: 'cost' },
      )
    }
  }

  /** Decides for one request; undefined when `skip` says so. Throws only for programming errors (bad key, cost). */
  async decide(request: Req): Promise<HttpDecision | undefined> {
    const options = this.#options
    if (options.skip && (await options.skip(request))) return undefined
    this.#warnOnUntrustedProxy(request)
    const key = options.key
      ? await options.key(request)
      : ipKey(this.#binding.clientIp(request) ?? '', { ipv6Subnet: this.#ipv6Subnet })
    const cost = typeof options.cost === 'function' ? await options.cost(request) : (options.cost ?? 1)
    const limiter =
      this.#fixed ?? this.#limiterFor(await (options.limit as (request: Req) => Awaitable<number>)(request))
    const result = await limiter.limit(key, { cost })
    return this.#toDecision(limiter, result)
  }

  #toDecision(limiter: RateLimiter, result: RateLimitResult): HttpDecision {
    const options = this.#options
    const policy = result.source === 'policy'
    const format = options.headers ?? 'draft-6'
    const pk =
      options.partitionKeySecret && (format === 'draft-8' || format === 'draft-11')
        ? partitionKey(result.key, options.partitionKeySecret)
        : undefined
    const headers = policy
      ? result.allowed
        ? {}
        : { 'Retry-After': String(toSeconds(result.retryAfter)) }
      : rateLimitHeaders(result, { format, legacy: options.legacyHeaders ?? false, partitionKey: pk })
    const statusCode = policy ? 503 : (options.statusCode ?? 429)
    return { result, headers, statusCode, limiter }
  }

  /** The body of a denial: `message`, problem details, or the default JSON. */
  async body(
    request: Req,
    { result, statusCode }: HttpDecision,
  ): Promise<{ contentType: string; payload: string }> {
    const options = this.#options
    if (result.source === 'policy') {
      return json({ error: 'Service Unavailable', message: 'Rate limiting is unavailable; retry later.' })
    }
    const { message } = options
    if (message !== undefined) {
      const body = typeof message === 'function' ? await message(request, result) : message
      return typeof body === 'string'
        ? { contentType: 'text/plain; charset=utf-8', payload: body }
        : json(body)
    }
    const seconds = toSeconds(result.retryAfter)
    const detail = `Too many requests: retry in ${seconds} second${seconds === 1 ? '' : 's'}.`
    if (options.problemDetails) {
      return {
        contentType: 'application/problem+json',
        payload: JSON.stringify({
          type: QUOTA_EXCEEDED,
          title: 'Request cannot be satisfied as assigned quota has been exceeded',
          status: statusCode,
          detail,
          'violated-policies': result.rules.filter((rule) => !rule.allowed).map((rule) => rule.rule.name),
        }),
      }
    }
    return json({ error: 'Too Many Requests', message: detail, retryAfter: seconds })
  }

  /** Arms the refund of `skipFailedRequests`/`skipSuccessfulRequests` on the raw response. */
  track(response: TrackedResponse, { limiter, result }: HttpDecision): void {
    this.#track(response, limiter, result)
  }

  #track(response: TrackedResponse, limiter: RateLimiter, result: RateLimitResult): void {
    const { skipFailedRequests, skipSuccessfulRequests } = this.#options
    if (!result.allowed || (!skipFailedRequests && !skipSuccessfulRequests)) return
    const wasSuccessful = this.#options.requestWasSuccessful ?? ((status: number) => status < 400)
    let settled = false
    const settle = () => {
      if (settled) return
      settled = true
      // A connection closed before the response finished counts as a failure.
      const success = response.writableFinished && wasSuccessful(response.statusCode)
      if ((success && skipSuccessfulRequests) || (!success && skipFailedRequests)) void limiter.refund(result)
    }
    response.once('finish', settle)
    response.once('close', settle)
  }

  #limiterFor(limit: number): RateLimiter {
    let limiter = this.#limiters.get(limit)
    if (limiter === undefined) {
      if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) {
        throw invalid(
          'ERR_RATEWINDOW_INVALID_LIMIT',
          'limit',
          limit,
          'a positive whole number (returned by the `limit` function)',
        )
      }
      if (this.#limiters.size >= MAX_DYNAMIC_LIMITS)
        this.#limiters.delete(this.#limiters.keys().next().value!)
      limiter = new RateLimiter({ ...this.#base, rules: this.#makeRule!(limit) })
      this.#limiters.set(limit, limiter)
    }
    return limiter
  }

  #warnOnUntrustedProxy(request: Req): void {
    if (this.#warnedUntrustedProxy || !this.#binding.untrustedForwardedFor(request)) return
    this.#warnedUntrustedProxy = true
    process.emitWarning(
      `A request carried X-Forwarded-For but ${this.#binding.name} does not trust proxies, so every client behind ` +
        `your proxy shares the proxy's rate limit. If a proxy you control sets it, ${this.#binding.trustProxyHint}.`,
      { code: 'RATEWINDOW_UNTRUSTED_PROXY' },
    )
  }
}

function json(body: unknown): { contentType: string; payload: string } {
  return { contentType: 'application/json; charset=utf-8', payload: JSON.stringify(body) }
}
