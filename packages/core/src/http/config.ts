/**
 * The middleware options resolved once, at construction, into a complete `HttpConfig`: defaults filled, each value
 * validated (the form of each option: option-checks.ts).
 */

import { ALGORITHMS } from '../algorithms/index.js'
import type { Rule } from '../algorithms/types.js'
import {
  LIMITER_OPTION_FLAGS,
  parseReservationHorizon,
  parseRules,
  type RateLimiterOptions,
} from '../limiter/options.js'
import { defaultMemoryStore } from '../stores/local/memory.js'
import type { Awaitable } from '../stores/types.js'
import { type Duration, parseTimerDuration } from '../support/duration.js'
import { invalid, requireObject } from '../support/errors.js'
import { rejectUnknownOptions } from '../support/option-names.js'
import { wholeNumber } from '../support/validators.js'
import { type AccessList, parseAccessList } from './access-list.js'
import type { HeaderFormat } from './headers.js'
import { parseIpv6Subnet } from './keys.js'
import { checkShapes } from './option-checks.js'
import {
  CONCURRENCY_NAMES,
  type ConcurrencyOptions,
  DELAY_DEFAULTS,
  DELAY_NAMES,
  type DelayOptions,
  HTTP_DEFAULTS,
  HTTP_NAMES,
  type HttpRateLimitOptions,
  type RulesResolver,
} from './options.js'
import { type SuccessCheck, successCheck } from './success-check.js'

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
  /** With `plans`: the request's plan (undefined: the first plan, or `defaultPlan`). */
  plan: ((request: Req) => Awaitable<string>) | undefined
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
  warnHeader: boolean
  partitionKeySecret: string | undefined
  statusCode: number
  /** The status of a request a `quota` rule refused (`quotaStatusCode`, else `statusCode`). */
  quotaStatusCode: number
  message: HttpRateLimitOptions<Req>['message']
  problemDetails: boolean
  skipFailedRequests: boolean
  skipSuccessfulRequests: boolean
  /** `requestWasSuccessful` as the engine asks it: with every argument, each form taking its own. */
  requestWasSuccessful: SuccessCheck<Req>
  /** The `concurrency` option with its defaults filled in (the limit and lease are checked by `ConcurrencyLimiter`). */
  concurrency:
    | { limit: number; lease?: Duration; name: string; releaseOnClose: boolean; renew: boolean }
    | undefined
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
    plan: options.plan,
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
    warnHeader: options.warnHeader ?? HTTP_DEFAULTS.warnHeader,
    partitionKeySecret: options.partitionKeySecret,
    statusCode: options.statusCode ?? HTTP_DEFAULTS.statusCode,
    quotaStatusCode: options.quotaStatusCode ?? options.statusCode ?? HTTP_DEFAULTS.statusCode,
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
    wholeNumber(value, option, { min: 1, allowed: 'a positive whole number such as 10' })
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
  const { releaseOnClose = false, renew = false } = concurrency
  for (const [option, value] of [
    ['releaseOnClose', releaseOnClose],
    ['renew', renew],
  ] as const) {
    if (typeof value !== 'boolean')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', `concurrency.${option}`, value, 'true or false')
  }
  return { limit: concurrency.limit, lease: concurrency.lease, name, releaseOnClose, renew }
}
