import type { WindowAlgorithmName } from '../algorithms/index.js'
import type { Rule } from '../algorithms/types.js'
import { LIMITER_OPTION_FLAGS, type RateLimiterOptions } from '../limiter/options.js'
import type { RateLimitResult } from '../result.js'
import type { Awaitable } from '../stores/types.js'
import type { Duration } from '../support/duration.js'
import { namesOf } from '../support/option-names.js'
import type { AccessListOption } from './access-list.js'
import type { HeaderFormat } from './headers.js'
import type { RequestWasSuccessful } from './success-check.js'

/** What a `rules` function returns for a request: its rules, or its rules and cost. */
export type ResolvedRules = Rule | readonly Rule[] | { rules: Rule | readonly Rule[]; cost?: number }

/** A `rules` function: the rules (and optionally the cost) of a request, e.g. by plan or API key. */
export type RulesResolver<Req> = (request: Req) => Awaitable<ResolvedRules>

/** The body of a denied request: a string (sent as text/plain) or an object (sent as JSON). */
export type ResponseBody = string | Record<string, unknown>

/**
 * Middleware options: the same names and meanings in the Express, Koa and Fastify adapters. `Res` is the
 * response a two-parameter `requestWasSuccessful` receives.
 */
export interface HttpRateLimitOptions<Req, Res = unknown>
  extends Pick<
    RateLimiterOptions,
    | 'store'
    | 'prefix'
    | 'group'
    | 'timeout'
    | 'onStoreError'
    | 'onShed'
    | 'fallback'
    | 'onError'
    | 'circuitBreaker'
    | 'blockedCache'
    | 'name'
    | 'shadow'
    | 'observer'
    | 'nearLimit'
    | 'penalty'
    | 'reservationHorizon'
    | 'overrides'
    | 'maxDebt'
    | 'plans'
    | 'defaultPlan'
  > {
  /**
   * With `plans`: the request's plan, one of their names (e.g. from the authenticated account, never from what the
   * client sends). A name not among `plans` takes `defaultPlan`, or is refused with `ERR_RATEWINDOW_UNKNOWN_PLAN`
   * (an error for the framework's error handling, as a throwing `key` is). @default the first plan
   */
  plan?: (request: Req) => Awaitable<string>
  /** Requests per `window`, or a function of the request (e.g. by plan). Not with `rules`. @default 100 */
  limit?: number | ((request: Req) => Awaitable<number>)
  /** The window: ms or `'30s'`, `'1m'`, `'15 minutes'`, `'1h'`… Not with `rules`. @default '1m' */
  window?: Duration
  /** The algorithm for `limit` and `window`. Not with `rules`. @default 'sliding-window-counter' */
  algorithm?: WindowAlgorithmName
  /**
   * Explicit rules instead of `limit`/`window`/`algorithm`, e.g. `[tokenBucket(...), fixedWindow(...)]`; or a
   * function of the request that returns them (e.g. by plan), optionally with the request's cost:
   * `(request) => plans[request.user.plan]`, where a plan is rules or `{ rules, cost }`. Each rule set counts
   * on its own; return the same objects for a plan (built once) and resolving costs one map lookup.
   */
  rules?: Rule | readonly Rule[] | RulesResolver<Req>
  /** The client identifier. @default the client IP (framework trust-proxy rules apply), IPv6 masked to `ipv6Subnet` */
  key?: (request: Req) => Awaitable<string>
  /** IPv6 prefix length the default key groups clients by; `false` for full addresses. @default 56 */
  ipv6Subnet?: number | false
  /**
   * Clients never limited nor counted, by address/network or key: an `AccessList` (reloadable with `set`) or
   * `{ ips, keys }`. Checked before any store call. A deny-listed client is denied even when allow-listed.
   */
  allowList?: AccessListOption
  /**
   * Clients always refused with `denyStatusCode`: by address/network or key, an `AccessList` (reloadable with
   * `set`) or `{ ips, keys }`; or a function of the request returning true to refuse it (koa-ratelimit's
   * `blacklist` function). Checked before any store call, and before `skip` and `allowList`: a denied client is
   * refused even when skipped or allow-listed. `handler` is not called for them.
   */
  denyList?: AccessListOption | ((request: Req) => Awaitable<boolean>)
  /** Status of a deny-listed request. @default 403 */
  denyStatusCode?: number
  /**
   * Requests for which this returns true are not limited and not counted; `true` skips every request (as
   * `enabled: false`).
   */
  skip?: boolean | ((request: Req) => Awaitable<boolean>)
  /**
   * `false` turns the middleware off (tests, an environment): no decision, no store call, no headers, and
   * `request.rateLimit` stays unset; e.g. `enabled: process.env.NODE_ENV !== 'test'`. Options are still checked.
   * @default true
   */
  enabled?: boolean
  /** What a request costs: whole units. @default 1 */
  cost?: number | ((request: Req) => Awaitable<number>)
  /** RateLimit header style, or `false` for none. @default 'draft-6' */
  headers?: HeaderFormat | false
  /** Also send `X-RateLimit-Limit/Remaining/Reset`. @default false */
  legacyHeaders?: boolean
  /**
   * Soft limits: on an admitted response, a `RateLimit-Warning` field naming each rule whose `warnAt` share of its
   * limit is used, `"<policy>";q=<limit>;r=<remaining>` (docs/plans-and-quotas.md). @default false
   */
  warnHeader?: boolean
  /** Secret for the draft-8/-11 partition key (`pk`): an HMAC of the key, never the bare key. @default none */
  partitionKeySecret?: string
  /** Status of a denied request. @default 429 */
  statusCode?: number
  /**
   * Status of a request refused by a `quota` rule, whose period's allowance is used (docs/plans-and-quotas.md): 402
   * tells a client to upgrade or buy more rather than slow down. Its body says so, and `Retry-After` is the period's
   * end. @default `statusCode`
   */
  quotaStatusCode?: number
  /** Body of a denied request: a string (text/plain), an object (JSON), or a function of the request. */
  message?: ResponseBody | ((request: Req, result: RateLimitResult) => Awaitable<ResponseBody>)
  /** Answer denials with an RFC 9457 `application/problem+json` body (the "quota-exceeded" type). @default false */
  problemDetails?: boolean
  /**
   * Give the request back when its response was sent and failed (`requestWasSuccessful` false). A client that
   * disconnects before its response is sent gets nothing back (docs/counters.md). @default false
   */
  skipFailedRequests?: boolean
  /** Give the request back when its response was sent and succeeded. @default false */
  skipSuccessfulRequests?: boolean
  /**
   * What counts as success for the two options above: `(statusCode)`, or the adapter's `(request, response)`
   * when the function declares two parameters (see `RequestWasSuccessful`); sync or async. @default status < 400
   */
  requestWasSuccessful?: RequestWasSuccessful<Req, Res>
  /**
   * Also hold at most `limit` requests of a client in flight at once (after its rate limit admits it): a slot
   * is taken when the request starts and given back when the handler's work is done (Express: the response is
   * ended; Koa: `await next()` returned; Fastify: the reply was sent), not when the client disconnects; or after
   * `lease` if that never happens. `releaseOnClose` for responses that end with the client (SSE, long-poll). Denied with `statusCode` and `Retry-After: 1`; draft-8/-11
   * headers name it with `qu="concurrent-requests"`. Needs a store with leases (MemoryStore, RedisStore).
   */
  concurrency?: ConcurrencyOptions
  /**
   * Wait instead of refuse: a request over the limit whose slot is at most `delay.max` away waits for it, then
   * proceeds; its slot is reserved in the same store call that decided it, so the waiting requests never exceed
   * the limit when they run. Beyond `max`, or past the bounds on waiting requests, it is refused as usual. A
   * delayed response has the RateLimit headers of an admitted request with remaining 0 and no Retry-After; the
   * observer sees the outcome `'delayed'`. A client that disconnects while waiting gives its slot back. Needs
   * rules that can reserve: `algorithm: 'gcra'` (recommended), `'token-bucket'` or `'sliding-window-log'`, on a
   * MemoryStore or RedisStore (docs/waiting.md). `{}` for the defaults. @default none: refuse at once
   */
  delay?: DelayOptions
}

/** The `delay` middleware option (docs/waiting.md). */
export interface DelayOptions {
  /**
   * The longest a request waits for its slot: further away, it is refused. Keep it well under the timeouts of
   * the proxies in front of the app (often 30 to 60 s). @default '5s'
   */
  max?: Duration
  /** Requests of one client (key) waiting at once in this middleware; one more is refused. @default 10 */
  maxPerKey?: number
  /** Requests waiting at once in this middleware (in this process); one more is refused. @default 1000 */
  maxWaiting?: number
}

/** `DelayOptions`' defaults, in one place (the `@default` tags above say the same). */
export const DELAY_DEFAULTS = {
  max: '5s',
  maxPerKey: 10,
  maxWaiting: 1000,
} as const satisfies DelayOptions

/** The `concurrency` middleware option. */
export interface ConcurrencyOptions {
  /** Requests of one client in flight at once. A positive whole number. */
  limit: number
  /** The longest a slot is held without a release (with `renew`: without its process renewing it). @default '1m' */
  lease?: Duration
  /**
   * Renew a slot every half lease while its request runs, so that a request longer than `lease` keeps it. Only for
   * handlers that always end: a response never ended then holds its slot as long as the process runs. @default false
   */
  renew?: boolean
  /** Policy name in draft-8/-11 headers. @default 'concurrency' */
  name?: string
  /**
   * Give the slot back when the response finishes or the client's connection closes, whichever comes first,
   * instead of when the handler's work is done: for responses that legitimately end with the client, such as
   * server-sent events and long polls. A client that disconnects then frees its slot while the handler may
   * still run, so leave it off wherever the handler does work after the client leaves. @default false
   */
  releaseOnClose?: boolean
}

export const HTTP_NAMES = namesOf<HttpRateLimitOptions<unknown>>({
  ...LIMITER_OPTION_FLAGS,
  limit: true,
  window: true,
  algorithm: true,
  rules: true,
  plan: true,
  key: true,
  ipv6Subnet: true,
  allowList: true,
  denyList: true,
  denyStatusCode: true,
  skip: true,
  enabled: true,
  cost: true,
  headers: true,
  legacyHeaders: true,
  warnHeader: true,
  partitionKeySecret: true,
  statusCode: true,
  quotaStatusCode: true,
  message: true,
  problemDetails: true,
  skipFailedRequests: true,
  skipSuccessfulRequests: true,
  requestWasSuccessful: true,
  concurrency: true,
  delay: true,
})

export const DELAY_NAMES = namesOf<DelayOptions>({ max: true, maxPerKey: true, maxWaiting: true })
export const CONCURRENCY_NAMES = namesOf<ConcurrencyOptions>({
  limit: true,
  lease: true,
  name: true,
  releaseOnClose: true,
  renew: true,
})

/** A middleware option's name (`limit`, `key`, `statusCode`, …). */
type HttpOptionName = keyof HttpRateLimitOptions<unknown>

/**
 * The option names of a middleware whose options `T` are these options but some, plus its own (@ratewindow/trpc's
 * and @ratewindow/graphql's): every middleware option but the `refused` ones (those `T` leaves out with `Omit`),
 * then `T`'s `own`. The compiler checks both lists against `T` (a name missing or too many fails typecheck), so
 * the list that `rejectUnknownOptions` checks cannot drift from the type.
 * @example
 * interface CallOptions extends Omit<HttpRateLimitOptions<Call>, 'statusCode' | 'message'> {
 *   clientIp?: (call: Call) => string | undefined
 * }
 * const NAMES = middlewareOptionNames<CallOptions>({ statusCode: true, message: true }, { clientIp: true })
 */
export function middlewareOptionNames<T>(
  refused: Record<Exclude<HttpOptionName, keyof T>, true>,
  own: Record<Exclude<keyof T, HttpOptionName>, true>,
): readonly string[] {
  return Object.freeze([...HTTP_NAMES.filter((name) => !Object.hasOwn(refused, name)), ...Object.keys(own)])
}

/** The defaults of the middleware options, in one place. */
export const HTTP_DEFAULTS = {
  limit: 100,
  window: '1m',
  algorithm: 'sliding-window-counter',
  cost: 1,
  headers: 'draft-6',
  legacyHeaders: false,
  warnHeader: false,
  statusCode: 429,
  denyStatusCode: 403,
  problemDetails: false,
  skipFailedRequests: false,
  skipSuccessfulRequests: false,
  requestWasSuccessful: (statusCode: number) => statusCode < 400,
} as const satisfies HttpRateLimitOptions<unknown>
