import { ALGORITHMS } from '../algorithms/index.js'
import type { AlgorithmName, Rule } from '../algorithms/types.js'
import {
  LIMITER_OPTION_FLAGS,
  parseReservationHorizon,
  parseRules,
  type RateLimiterOptions,
} from '../limiter/options.js'
import type { RateLimitResult } from '../result.js'
import { defaultMemoryStore } from '../stores/local/memory.js'
import type { Awaitable } from '../stores/types.js'
import { type Duration, parseTimerDuration } from '../support/duration.js'
import { describeValue, invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { type AccessList, type AccessListOption, parseAccessList } from './access-list.js'
import { HEADER_FORMATS, HEADER_FORMATS_ALLOWED, type HeaderFormat } from './headers.js'
import { parseIpv6Subnet } from './keys.js'
import { type RequestWasSuccessful, type SuccessCheck, successCheck } from './success-check.js'

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
  > {
  /** Requests per `window`, or a function of the request (e.g. by plan). Not with `rules`. @default 100 */
  limit?: number | ((request: Req) => Awaitable<number>)
  /** The window: ms or `'30s'`, `'1m'`, `'15 minutes'`, `'1h'`… Not with `rules`. @default '1m' */
  window?: Duration
  /** The algorithm for `limit` and `window`. Not with `rules`. @default 'sliding-window-counter' */
  algorithm?: AlgorithmName
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
  /** Secret for the draft-8/-11 partition key (`pk`): an HMAC of the key, never the bare key. @default none */
  partitionKeySecret?: string
  /** Status of a denied request. @default 429 */
  statusCode?: number
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
  /** The longest a slot is held without a release. @default '1m' */
  lease?: Duration
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

const HTTP_NAMES = namesOf<HttpRateLimitOptions<unknown>>({
  ...LIMITER_OPTION_FLAGS,
  limit: true,
  window: true,
  algorithm: true,
  rules: true,
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
  partitionKeySecret: true,
  statusCode: true,
  message: true,
  problemDetails: true,
  skipFailedRequests: true,
  skipSuccessfulRequests: true,
  requestWasSuccessful: true,
  concurrency: true,
  delay: true,
})
const DELAY_NAMES = namesOf<DelayOptions>({ max: true, maxPerKey: true, maxWaiting: true })
const CONCURRENCY_NAMES = namesOf<ConcurrencyOptions>({
  limit: true,
  lease: true,
  name: true,
  releaseOnClose: true,
})

/** The defaults of the middleware options, in one place. */
export const HTTP_DEFAULTS = {
  limit: 100,
  window: '1m',
  algorithm: 'sliding-window-counter',
  cost: 1,
  headers: 'draft-6',
  legacyHeaders: false,
  statusCode: 429,
  denyStatusCode: 403,
  problemDetails: false,
  skipFailedRequests: false,
  skipSuccessfulRequests: false,
  requestWasSuccessful: (statusCode: number) => statusCode < 400,
} as const satisfies HttpRateLimitOptions<unknown>

/** The middleware options resolved: complete, typed, validated. */
export interface HttpConfig<Req> {
  /** The options every `RateLimiter` of this middleware gets (checked by `RateLimiter`). */
  limiter: Omit<RateLimiterOptions, 'rules'> & { store: NonNullable<RateLimiterOptions['store']> }
  /** Explicit rules, or undefined when `limit`, `window` and `algorithm` (or a `rules` function) make them. */
  rules: readonly Rule[] | undefined
  /** The `rules` function, when rules are resolved per request. */
  resolveRules: RulesResolver<Req> | undefined
  /** Makes the rule for a limit (undefined with `rules`). */
  makeRule: ((limit: number) => Rule) | undefined
  limit: number | ((request: Req) => Awaitable<number>)
  key: ((request: Req) => Awaitable<string>) | undefined
  ipv6Subnet: number | false
  skip: ((request: Req) => Awaitable<boolean>) | undefined
  /** False with `enabled: false` or `skip: true`: the middleware decides nothing. */
  enabled: boolean
  allowList: AccessList | undefined
  denyList: AccessList | undefined
  /** `denyList` as a function of the request. */
  denyWhen: ((request: Req) => Awaitable<boolean>) | undefined
  denyStatusCode: number
  cost: number | ((request: Req) => Awaitable<number>)
  headers: HeaderFormat | false
  legacyHeaders: boolean
  partitionKeySecret: string | undefined
  statusCode: number
  message: HttpRateLimitOptions<Req>['message']
  problemDetails: boolean
  skipFailedRequests: boolean
  skipSuccessfulRequests: boolean
  /** `requestWasSuccessful` as the engine asks it: with every argument, each form taking its own. */
  requestWasSuccessful: SuccessCheck<Req>
  /** The `concurrency` option with its defaults filled in (the limit and lease are checked by `ConcurrencyLimiter`). */
  concurrency: { limit: number; lease?: Duration; name: string; releaseOnClose: boolean } | undefined
  /** The `delay` option with its defaults filled in. */
  delay: { maxMs: number; maxPerKey: number; maxWaiting: number } | undefined
}

/**
 * Resolves middleware options once: refuses unknown names (`adapterNames` are the adapter's own, such as
 * `handler`), fills every default, and validates each value. `where` names the options in messages.
 */
export function resolveHttpOptions<Req, Res = unknown>(
  options: HttpRateLimitOptions<Req, Res>,
  adapterNames: readonly string[] = [],
  where = 'rateLimit()',
): HttpConfig<Req> {
  requireObject(options, 'options', '{ limit: 100, window: "1m" }')
  rejectUnknownOptions(options, [...HTTP_NAMES, ...adapterNames], where)
  checkShapes(options)
  // Every limiter option passes through as it is (the names are LIMITER_OPTION_FLAGS: one list, checked against
  // RateLimiterOptions), with a MemoryStore when none is given.
  const store = options.store === undefined ? defaultMemoryStore() : options.store
  const limiter: HttpConfig<Req>['limiter'] = { store }
  for (const name of Object.keys(LIMITER_OPTION_FLAGS) as (keyof typeof LIMITER_OPTION_FLAGS)[]) {
    // Same name, same type on both sides (HttpRateLimitOptions picks them from RateLimiterOptions).
    if (name !== 'store') (limiter as Record<string, unknown>)[name] = options[name]
  }
  let makeRule: ((limit: number) => Rule) | undefined
  const resolveRules = typeof options.rules === 'function' ? options.rules : undefined
  if (options.rules === undefined) {
    const make = ALGORITHMS[options.algorithm ?? HTTP_DEFAULTS.algorithm].fromLimit
    const window = options.window ?? HTTP_DEFAULTS.window
    makeRule = (limit) => make(limit, window)
  }
  return {
    limiter,
    rules:
      options.rules === undefined || resolveRules !== undefined
        ? undefined
        : parseRules(options.rules as Rule | readonly Rule[]),
    resolveRules,
    makeRule,
    limit: options.limit ?? HTTP_DEFAULTS.limit,
    key: options.key,
    ipv6Subnet: parseIpv6Subnet(options.ipv6Subnet),
    skip: typeof options.skip === 'function' ? options.skip : undefined,
    enabled: options.enabled !== false && options.skip !== true,
    allowList: parseAccessList(options.allowList, 'allowList'),
    denyList:
      typeof options.denyList === 'function' ? undefined : parseAccessList(options.denyList, 'denyList'),
    denyWhen: typeof options.denyList === 'function' ? options.denyList : undefined,
    denyStatusCode: options.denyStatusCode ?? HTTP_DEFAULTS.denyStatusCode,
    cost: options.cost ?? HTTP_DEFAULTS.cost,
    headers: options.headers ?? HTTP_DEFAULTS.headers,
    legacyHeaders: options.legacyHeaders ?? HTTP_DEFAULTS.legacyHeaders,
    partitionKeySecret: options.partitionKeySecret,
    statusCode: options.statusCode ?? HTTP_DEFAULTS.statusCode,
    message: options.message,
    problemDetails: options.problemDetails ?? HTTP_DEFAULTS.problemDetails,
    skipFailedRequests: options.skipFailedRequests ?? HTTP_DEFAULTS.skipFailedRequests,
    skipSuccessfulRequests: options.skipSuccessfulRequests ?? HTTP_DEFAULTS.skipSuccessfulRequests,
    requestWasSuccessful: successCheck(options.requestWasSuccessful ?? HTTP_DEFAULTS.requestWasSuccessful),
    concurrency: parseConcurrency(options.concurrency, store),
    delay: parseDelay(options.delay, options.reservationHorizon),
  }
}

/** Checks the `delay` option and fills its defaults (whether the rules and store can reserve: the engine). */
function parseDelay(delay: DelayOptions | undefined, horizon: unknown): HttpConfig<unknown>['delay'] {
  if (delay === undefined) return undefined
  requireObject(delay, 'delay', "{ max: '5s' }")
  rejectUnknownOptions(delay, DELAY_NAMES, '`delay`')
  const {
    max = DELAY_DEFAULTS.max,
    maxPerKey = DELAY_DEFAULTS.maxPerKey,
    maxWaiting = DELAY_DEFAULTS.maxWaiting,
  } = delay
  const maxMs = parseTimerDuration(max, 'delay.max')
  for (const [option, value] of [
    ['delay.maxPerKey', maxPerKey],
    ['delay.maxWaiting', maxWaiting],
  ] as const) {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1)
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, 'a positive whole number such as 10')
  }
  parseReservationHorizon(horizon, { option: 'delay.max', ms: maxMs })
  return { maxMs, maxPerKey, maxWaiting }
}

/** Checks the `concurrency` option's shape, names and store; its limit and lease are checked by `ConcurrencyLimiter`. */
function parseConcurrency(
  concurrency: ConcurrencyOptions | undefined,
  store: unknown,
): HttpConfig<unknown>['concurrency'] {
  if (concurrency === undefined) return undefined
  requireObject(concurrency, 'concurrency', '{ limit: 10 }')
  rejectUnknownOptions(concurrency, CONCURRENCY_NAMES, '`concurrency`')
  if (typeof (store as { acquire?: unknown } | null)?.acquire !== 'function') {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'concurrency',
      store,
      'a store with leases (MemoryStore, RedisStore) as `store`',
    )
  }
  const { name = 'concurrency' } = concurrency
  if (typeof name !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'concurrency.name',
      name,
      'a short token of letters, digits, `_`, `.`, `-`',
    )
  }
  const { releaseOnClose = false } = concurrency
  if (typeof releaseOnClose !== 'boolean')
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'concurrency.releaseOnClose',
      releaseOnClose,
      'true or false',
    )
  return { limit: concurrency.limit, lease: concurrency.lease, name, releaseOnClose }
}

const FUNCTION_OPTIONS = ['key', 'requestWasSuccessful', 'onError'] as const
const BOOLEAN_OPTIONS = [
  'legacyHeaders',
  'problemDetails',
  'skipFailedRequests',
  'skipSuccessfulRequests',
] as const

/** Checks the form of each middleware option (the `RateLimiter` ones are checked by `RateLimiter`). */
function checkShapes<Req, Res>(options: HttpRateLimitOptions<Req, Res>): void {
  for (const name of FUNCTION_OPTIONS) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, options[name], 'a function')
    }
  }
  for (const name of BOOLEAN_OPTIONS) {
    if (options[name] !== undefined && typeof options[name] !== 'boolean') {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, options[name], 'true or false')
    }
  }
  const { skip, enabled } = options
  if (skip !== undefined && typeof skip !== 'function' && typeof skip !== 'boolean') {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'skip',
      skip,
      'a function of the request, or true or false',
    )
  }
  if (enabled !== undefined && typeof enabled !== 'boolean') {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'enabled',
      enabled,
      "true or false (from an environment variable, compare it: `enabled: process.env.RATE_LIMIT !== 'off'`)",
    )
  }
  const explicit = ['limit', 'window', 'algorithm'].filter(
    (name) => options[name as keyof typeof options] !== undefined,
  )
  if (options.rules !== undefined && explicit.length > 0) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`rules\` replaces \`limit\`, \`window\` and \`algorithm\`: pass either \`rules\` or those, not both (received \`rules\` and \`${explicit.join('`, `')}\`).`,
      { option: 'rules' },
    )
  }
  const { algorithm } = options
  if (algorithm !== undefined && (typeof algorithm !== 'string' || !Object.hasOwn(ALGORITHMS, algorithm))) {
    const names = Object.keys(ALGORITHMS).map((name) => `'${name}'`)
    throw invalid('ERR_RATEWINDOW_INVALID_ALGORITHM', 'algorithm', algorithm, `one of ${names.join(', ')}`)
  }
  const { headers } = options
  if (headers !== undefined && headers !== false && !HEADER_FORMATS.includes(headers)) {
    const peer =
      typeof headers === 'object' && headers !== null
        ? " (custom header names are koa-ratelimit's; ratewindow writes the IETF fields and, with `legacyHeaders`, X-RateLimit-*)"
        : ''
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'headers', headers, `${HEADER_FORMATS_ALLOWED}${peer}`)
  }
  for (const name of ['statusCode', 'denyStatusCode'] as const) {
    const status = options[name]
    if (status !== undefined && (!Number.isInteger(status) || status < 400 || status > 599)) {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, status, 'an HTTP error status from 400 to 599')
    }
  }
  const { limit } = options
  if (limit !== undefined && typeof limit !== 'function' && typeof limit !== 'number') {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_LIMIT',
      'limit',
      limit,
      'a positive whole number or a function of the request',
    )
  }
  // A constant, checked here so that its message is not the one of a `limit` function's result.
  if (typeof limit === 'number' && (!Number.isSafeInteger(limit) || limit < 1)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_LIMIT',
      'limit',
      limit,
      `a positive whole number such as 100${limit === 0 ? ' (to turn limiting off, pass `enabled: false`)' : ''}`,
    )
  }
  const { cost } = options
  if (
    cost !== undefined &&
    typeof cost !== 'function' &&
    (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0)
  ) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_COST',
      'cost',
      cost,
      'a whole number >= 0 or a function of the request',
    )
  }
  const { message } = options
  if (
    message !== undefined &&
    (message === null || !['string', 'object', 'function'].includes(typeof message))
  ) {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'message', message, 'a string, an object or a function')
  }
  const secret = options.partitionKeySecret
  if (secret !== undefined && (typeof secret !== 'string' || secret.length < 16)) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`partitionKeySecret\` must be a string of at least 16 characters; received ${describeValue(typeof secret === 'string' ? `${secret.length} characters` : secret)}.`,
      { option: 'partitionKeySecret' },
    )
  }
}
