/**
 * The options of `slowDown()`, resolved once: `resolveSlowDownOptions` refuses unknown names (and those that
 * mean refusing, with what to do instead), fills every default from `SLOW_DOWN_DEFAULTS`, and checks each value.
 */
import type { CircuitBreakerOptions } from '../gateway/circuit-breaker.js'
import { HTTP_DEFAULTS } from '../http/options.js'
import { type RequestWasSuccessful, type SuccessCheck, successCheck } from '../http/success-check.js'
import type { WaitingBounds } from '../http/wait-room.js'
import type { FailureContext } from '../limiter/options.js'
import type { RateLimitObserver } from '../observe.js'
import type { Awaitable, Store } from '../stores/types.js'
import type { Duration } from '../support/duration.js'
import { describeValue, invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { type DelayTimers, PLATFORM_TIMERS } from '../time/delay-queue.js'

/**
 * The options of `slowDown()`: express-slow-down 2's names and meanings. `Args` are the arguments the adapter
 * passes to each callback: Express `(req, res)`, Koa `(ctx)`, Fastify `(request, reply)`, Hono `(c)`. `Res` is
 * the response a two-parameter `requestWasSuccessful` receives after the request (`args[0]`), as `rateLimit()`'s:
 * Express `res`, Koa `ctx.response`, Fastify `reply`, Hono `c.res`.
 */
export interface SlowDownOptions<Args extends unknown[], Res = Args[1]> {
  /** The window requests are counted in, ms (a fixed window: every client's ends at the same instant). @default 60000 */
  windowMs?: number
  /** Requests of a window that go at full speed; later ones are delayed. A number or a function. @default 1 */
  delayAfter?: number | ((...args: Args) => Awaitable<number>)
  /**
   * The delay of a request after `delayAfter`, ms: a number (the same for each), or a function of `used` (this
   * request's count in the window) and the request. @default (used) => (used - delayAfter) * 1000
   */
  delayMs?: number | ((used: number, ...args: Args) => Awaitable<number>)
  /** The longest delay, ms: keep it under your proxy's timeout. A number or a function. @default Infinity */
  maxDelayMs?: number | ((...args: Args) => Awaitable<number>)
  /**
   * Delayed requests of one client (key) waiting at once in this middleware (in this process): one more is
   * refused at once, 429 with `Retry-After` the delay it would have waited (observer outcome `'shed'`), as
   * `delay.maxPerKey` of `rateLimit()`. `false`: no bound (express-slow-down's behaviour). @default 10
   */
  maxPerKey?: number | false
  /**
   * Delayed requests waiting at once in this middleware (in this process), every client together: one more is
   * refused as past `maxPerKey`. Each holds an open connection: keep it well under the process's file
   * descriptor limit. `false`: no bound (express-slow-down's behaviour). @default 1000
   */
  maxWaiting?: number | false
  /** The client's key. @default the client IP (the framework's trust-proxy rules apply), IPv6 masked to `ipv6Subnet` */
  keyGenerator?: (...args: Args) => Awaitable<string>
  /** IPv6 prefix length the default key groups clients by; `false` for full addresses. @default 56 */
  ipv6Subnet?: number | false
  /** Requests for which this returns true are neither counted nor delayed. */
  skip?: (...args: Args) => Awaitable<boolean>
  /**
   * Take back the count of a request whose response was sent and failed (`requestWasSuccessful` false), or
   * whose client left while it was being delayed (the handler never ran). @default false
   */
  skipFailedRequests?: boolean
  /** Take back the count of a request whose response was sent and succeeded. @default false */
  skipSuccessfulRequests?: boolean
  /**
   * What counts as success for the two options above, as `rateLimit()`'s: a function of one parameter gets the
   * response's status code, one of two the adapter's request and response (express-slow-down's `(req, res)`;
   * Koa `(ctx, ctx.response)`, Hono `(c, c.res)`), sync or async. @default the response status is below 400
   */
  requestWasSuccessful?: RequestWasSuccessful<Args[0], Res>
  /**
   * Where the counts live: `MemoryStore` (this process), `RedisStore` or `SyncedStore` (shared by every
   * process). Counts are kept apart from every `rateLimit()` on the same store. @default new MemoryStore()
   */
  store?: Store
  /** Prepended to the counters' keys in the store. @default 'rw' */
  prefix?: string
  /** Longest wait for the store; past it the request goes on without delay. @default '250ms' */
  timeout?: Duration
  /** A store that counts while the main one fails, e.g. `new MemoryStore()`. */
  fallback?: Store
  /**
   * Receives every store failure; the request then goes on without delay.
   * @default a throttled console.error that names the middleware `slowDown()` (or its `name`)
   */
  onError?: (error: unknown, context: FailureContext) => unknown
  /** Stop waiting on a store that keeps failing (see RateLimiterOptions); `false` to disable. */
  circuitBreaker?: CircuitBreakerOptions | false
  /** This middleware's name in observer events and metrics. @default its namespace in the store */
  name?: string
  /**
   * Decisions (outcome `'delayed'` when delayed, `'shed'` when refused past `maxPerKey` or `maxWaiting`, else
   * `'allowed'` or `'failed-open'`), store calls, breakers.
   */
  observer?: RateLimitObserver
  /**
   * express-slow-down's switch for its startup checks (`false`, or `{ delayMs: false }`…): accepted so that a
   * configuration moves unchanged; ratewindow checks every option at construction whatever it says.
   */
  validate?: boolean | Readonly<Record<string, boolean>>
  /**
   * express-rate-limit's name: accepted so that a configuration moves unchanged. slowDown always lets a request
   * through without delay when the store fails (and reports it to `onError`).
   */
  passOnStoreError?: boolean
  /**
   * The timers delays run on: `now()`, `setTimeout`, `clearTimeout`. For tests that drive time; the platform's
   * by default (looked up at each call, so that fake timers drive them too). Every middleware on the same timers
   * shares one timer.
   */
  timers?: DelayTimers
}

/** The defaults of `slowDown()`, in one place. */
export const SLOW_DOWN_DEFAULTS = {
  windowMs: 60_000,
  delayAfter: 1,
  maxDelayMs: Number.POSITIVE_INFINITY,
  skipFailedRequests: false,
  skipSuccessfulRequests: false,
  maxPerKey: 10,
  maxWaiting: 1000,
} as const

const SLOW_DOWN_NAMES = namesOf<SlowDownOptions<unknown[]>>({
  windowMs: true,
  delayAfter: true,
  delayMs: true,
  maxDelayMs: true,
  maxPerKey: true,
  maxWaiting: true,
  keyGenerator: true,
  ipv6Subnet: true,
  skip: true,
  skipFailedRequests: true,
  skipSuccessfulRequests: true,
  requestWasSuccessful: true,
  store: true,
  prefix: true,
  timeout: true,
  fallback: true,
  onError: true,
  circuitBreaker: true,
  name: true,
  observer: true,
  validate: true,
  passOnStoreError: true,
  timers: true,
})

const NO_LIMIT =
  'slowDown() refuses no request for its count: those after `delayAfter` are delayed (only past `maxPerKey` or `maxWaiting` delayed requests waiting at once is one refused). For a hard limit, add `rateLimit()`.'
const NO_ANSWER = (option: string) =>
  `slowDown() answers a request itself only past its bounds on delayed requests (\`maxPerKey\`, \`maxWaiting\`), with a 429 and the default body, so it has no \`${option}\`. To answer otherwise, put a \`rateLimit()\` before it.`

/** Names express-slow-down itself refuses, or that mean refusing: each with what to do instead. */
const REFUSED: Readonly<Record<string, string>> = {
  limit: NO_LIMIT,
  max: NO_LIMIT,
  handler: NO_ANSWER('handler'),
  message: NO_ANSWER('message'),
  statusCode: NO_ANSWER('statusCode'),
  headers:
    'slowDown() sends no RateLimit headers (as express-slow-down); the delay is on the request. For headers, add `rateLimit()`.',
  standardHeaders:
    'slowDown() sends no RateLimit headers (as express-slow-down); the delay is on the request. For headers, add `rateLimit()`.',
  legacyHeaders:
    'slowDown() sends no RateLimit headers (as express-slow-down); the delay is on the request. For headers, add `rateLimit()`.',
  draft_polli_ratelimit_headers:
    'slowDown() sends no RateLimit headers (as express-slow-down); the delay is on the request. For headers, add `rateLimit()`.',
  identifier:
    'slowDown() sends no RateLimit headers, so it has no policy name to give; `name` names it in observer events.',
  onLimitReached:
    'express-slow-down 2 dropped `onLimitReached`, and slowDown() refuses no request for its count: a delayed request carries its delay (`req.slowDown.delay` in Express), and an `observer` sees the outcome `delayed`.',
  requestPropertyName:
    "`requestPropertyName` is @ratewindow/express's only: here the info is always at `ctx.state.slowDown` (Koa), `request.slowDown` (Fastify, and the request of a Nest middleware) or `c.get('slowDown')` (Hono).",
  window: "slowDown() takes express-slow-down's `windowMs` (milliseconds).",
}

/** The most requests a window can count: far beyond any client, within the rule's exactness bound. */
export const MAX_WINDOW_MS = 2 ** 31 - 1

/** The options of `slowDown()` resolved: complete, typed, validated. */
export interface SlowDownConfig<Args extends unknown[]> {
  windowMs: number
  delayAfter: SlowDownOptions<Args>['delayAfter'] & {}
  /** Undefined: the default, `(used - delayAfter) * 1000`. */
  delayMs: SlowDownOptions<Args>['delayMs']
  maxDelayMs: SlowDownOptions<Args>['maxDelayMs'] & {}
  skipFailedRequests: boolean
  skipSuccessfulRequests: boolean
  /** The bounds on delayed requests waiting at once; `Infinity` where the option is `false`. */
  bounds: WaitingBounds
  /** `requestWasSuccessful` as the engine asks it: with every argument, each form taking its own. */
  requestWasSuccessful: SuccessCheck<Args[0]>
  timers: DelayTimers
}

/**
 * Resolves `slowDown()` options once: refuses unknown names (`adapterNames` are the adapter's own, such as
 * Express's `requestPropertyName`), fills every default, and validates each value. `where` names the options in
 * messages. The options the counting engine takes (store, prefix, key…) are checked by it.
 */
export function resolveSlowDownOptions<Args extends unknown[], Res>(
  options: SlowDownOptions<Args, Res>,
  adapterNames: readonly string[],
  where: string,
): SlowDownConfig<Args> {
  requireObject(options, 'options', '{ windowMs: 15 * 60 * 1000, delayAfter: 5, delayMs: 500 }')
  for (const name of Object.keys(options)) {
    // The adapter's own options (Express's `requestPropertyName`) are not refused.
    if (adapterNames.includes(name)) continue
    const reason = Object.hasOwn(REFUSED, name) ? REFUSED[name] : undefined
    if (reason !== undefined && (options as Record<string, unknown>)[name] !== undefined) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_UNKNOWN_OPTION',
        `Unknown option \`${name}\` in ${where} options: ${reason}`,
        { option: name },
      )
    }
  }
  const known = [...SLOW_DOWN_NAMES, ...adapterNames, ...Object.keys(REFUSED)]
  rejectUnknownOptions(options, known, where)
  const windowMs = options.windowMs ?? SLOW_DOWN_DEFAULTS.windowMs
  if (
    typeof windowMs !== 'number' ||
    !Number.isSafeInteger(windowMs) ||
    windowMs < 1 ||
    windowMs > MAX_WINDOW_MS
  )
    throw invalid(
      'ERR_RATEWINDOW_INVALID_WINDOW',
      'windowMs',
      windowMs,
      `a whole number of ms from 1 to ${MAX_WINDOW_MS}`,
    )
  const delayAfter = numberOrFunction(options.delayAfter, 'delayAfter', SLOW_DOWN_DEFAULTS.delayAfter, true)
  const maxDelayMs = numberOrFunction(options.maxDelayMs, 'maxDelayMs', SLOW_DOWN_DEFAULTS.maxDelayMs, false)
  const { delayMs } = options
  if (delayMs !== undefined && typeof delayMs !== 'function') checkDelay(delayMs, 'delayMs', false)
  for (const name of ['keyGenerator', 'skip', 'requestWasSuccessful'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, options[name], 'a function')
  }
  for (const name of ['skipFailedRequests', 'skipSuccessfulRequests', 'passOnStoreError'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'boolean')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, options[name], 'true or false')
  }
  const { validate } = options
  if (
    validate !== undefined &&
    typeof validate !== 'boolean' &&
    (typeof validate !== 'object' || validate === null)
  )
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'validate', validate, 'true, false or an object of checks')
  const timers = options.timers ?? PLATFORM_TIMERS
  if (
    typeof timers !== 'object' ||
    timers === null ||
    !['now', 'setTimeout', 'clearTimeout'].every(
      (name) => typeof (timers as unknown as Record<string, unknown>)[name] === 'function',
    )
  )
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'timers',
      timers,
      'an object with now, setTimeout and clearTimeout',
    )
  const { observer } = options
  if (observer !== undefined) requireObject(observer, 'observer', '{ onDecision(event) {} }')
  return {
    windowMs,
    delayAfter,
    delayMs,
    maxDelayMs,
    skipFailedRequests: options.skipFailedRequests ?? SLOW_DOWN_DEFAULTS.skipFailedRequests,
    skipSuccessfulRequests: options.skipSuccessfulRequests ?? SLOW_DOWN_DEFAULTS.skipSuccessfulRequests,
    bounds: {
      maxPerKey: parseBound(options.maxPerKey, 'maxPerKey', SLOW_DOWN_DEFAULTS.maxPerKey),
      maxWaiting: parseBound(options.maxWaiting, 'maxWaiting', SLOW_DOWN_DEFAULTS.maxWaiting),
    },
    requestWasSuccessful: successCheck(options.requestWasSuccessful ?? HTTP_DEFAULTS.requestWasSuccessful),
    timers,
  }
}

/** A bound on delayed requests: a positive whole number, or `false` for none (`Infinity`). */
function parseBound(value: unknown, option: string, fallback: number): number {
  if (value === undefined) return fallback
  if (value === false) return Number.POSITIVE_INFINITY
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1) return value
  throw invalid(
    'ERR_RATEWINDOW_INVALID_OPTION',
    option,
    value,
    `a positive whole number such as ${fallback}, or false for no bound (as express-slow-down)`,
  )
}

/** A number option, or a function of the request. */
function numberOrFunction<T>(
  value: T | undefined,
  option: string,
  fallback: number,
  whole: boolean,
): T | number {
  if (value === undefined) return fallback
  if (typeof value === 'function') return value
  checkDelay(value, option, whole)
  return value
}

/**
 * Checks a count or delay: a number >= 0 (`whole`: a whole number). `Infinity` passes for a delay (`maxDelayMs`
 * unbounded), and a negative delay returned by `delayMs` (`clamped`) counts as none, as in express-slow-down.
 */
export function checkDelay(
  value: unknown,
  option: string,
  whole: boolean,
  returned?: string,
  clamped = false,
): asserts value is number {
  const ok =
    typeof value === 'number' &&
    !Number.isNaN(value) &&
    (clamped || value >= 0) &&
    (whole ? Number.isSafeInteger(value) : value === Number.POSITIVE_INFINITY || Number.isFinite(value))
  if (ok) return
  const what = whole ? 'a whole number >= 0' : 'a number of ms >= 0'
  throw new RateLimitError(
    whole ? 'ERR_RATEWINDOW_INVALID_LIMIT' : 'ERR_RATEWINDOW_INVALID_OPTION',
    `\`${option}\` must be ${what}${returned === undefined ? ' or a function' : ` (${returned})`}; received ${describeValue(value)}.`,
    { option },
  )
}
