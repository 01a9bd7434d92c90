import {
  type Duration,
  type LimiterOperator,
  MemoryStore,
  RateLimitError,
  RateLimiter,
  slidingWindowCounter,
} from '@ratewindow/core'
import {
  fnOption,
  invalid,
  namesOf,
  rejectUnknownOptions,
  requireObject,
  wholeNumber,
} from '@ratewindow/core/support'
import { AdminStats } from './stats.js'

/**
 * A limiter the endpoint operates: a `RateLimiter`, a middleware of an adapter (Express, Koa, Hono: anything with
 * `operator`), or an operator handle itself (`app.ratewindow.operator({ name })` on Fastify).
 */
export type AdminLimiter = LimiterOperator | { readonly operator: LimiterOperator }

/**
 * What `authorize` answers: `true`, or the caller's name (the actor, passed into the limiters' override events),
 * lets the request in; anything else, a blank name (empty or whitespace only) included, refuses it (401 without an
 * `Authorization` header, else 403).
 */
export type Authorization = boolean | string | null | undefined

/** Options of `adminHandler()`. */
export interface AdminHandlerOptions {
  /** The limiters it operates, each by its `name` (`/limiters/:name/…`): `RateLimiter`s, middlewares or handles. */
  limiters: readonly AdminLimiter[]
  /**
   * Runs first for every request (after the endpoint's own limit): `true` or an actor name (not blank) lets it
   * in. Required: the endpoint refuses to start without it.
   * @example (request) => safeEqual(request.headers.get('authorization'), `Bearer ${token}`) && 'ops-token'
   */
  authorize: (request: Request) => Authorization | Promise<Authorization>
  /** The view `GET /stats` answers (`adminStats()`, given to the limiters as their observer). @default none: 404 */
  stats?: AdminStats
  /** Where the endpoint is mounted: requests under it are its own (`/_ratewindow/limiters`). @default '' */
  basePath?: string
  /** Requests the endpoint answers per `window`, from every caller together, before `authorize`. @default 300 */
  limit?: number
  /** @default '1m' */
  window?: Duration
  /** The largest body an action takes, bytes. @default 16384 */
  maxBodyBytes?: number
  /** Hears what failed inside the endpoint (answered 500, without its cause). @default a process warning */
  onError?: (error: unknown) => void
}

/** Every option resolved. */
export interface AdminConfig {
  /** Each limiter's operator handle, by the limiter's name. */
  limiters: ReadonlyMap<string, LimiterOperator>
  authorize: AdminHandlerOptions['authorize']
  stats: AdminStats | undefined
  basePath: string
  /** The endpoint's own limit: a RateLimiter on a MemoryStore of its own. */
  self: RateLimiter
  maxBodyBytes: number
  onError: ((error: unknown) => void) | undefined
}

/** Every default of `adminHandler()`, in one place. */
const DEFAULTS = {
  basePath: '',
  limit: 300,
  window: '1m',
  maxBodyBytes: 16_384,
} as const satisfies Partial<AdminHandlerOptions>

const OPTIONS = namesOf<AdminHandlerOptions>({
  limiters: true,
  authorize: true,
  stats: true,
  basePath: true,
  limit: true,
  window: true,
  maxBodyBytes: true,
  onError: true,
})

/** Validates every option and fills the defaults, once, at construction. */
/**
 * A base path that requests can match as written: '/'-separated segments of URL-safe characters (no
 * percent-encoding, spaces, '?', '#' or empty segments), none of them '.' or '..' (a client's path is normalised).
 */
const BASE_PATH = /^(?:\/(?!\.{1,2}(?:\/|$))[A-Za-z0-9\-_.~]+)+$/

export function resolveAdminOptions(options: AdminHandlerOptions): AdminConfig {
  requireObject(options, 'options', '{ limiters: [api], authorize }')
  rejectUnknownOptions(options, OPTIONS, 'adminHandler')
  const {
    authorize,
    stats,
    basePath = DEFAULTS.basePath,
    limit = DEFAULTS.limit,
    window = DEFAULTS.window,
    maxBodyBytes = DEFAULTS.maxBodyBytes,
    onError,
  } = options
  fnOption(
    authorize,
    'authorize',
    'a function of the request answering true or an actor name: the admin endpoint never starts open',
  )
  if (stats !== undefined && !(stats instanceof AdminStats))
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'stats', stats, 'what adminStats() returns')
  if (typeof basePath !== 'string' || (basePath !== '' && !BASE_PATH.test(basePath)))
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'basePath',
      basePath,
      "'' or a path of plain segments such as '/_ratewindow' (letters, digits, '-', '_', '.', '~'; no '.' or '..' segment, no trailing '/')",
    )
  wholeNumber(maxBodyBytes, 'maxBodyBytes', { min: 1 })
  if (onError !== undefined) fnOption(onError, 'onError')
  const self = new RateLimiter({
    rules: slidingWindowCounter({ limit, window, name: 'admin' }),
    store: new MemoryStore(),
    name: 'ratewindow-admin',
    prefix: 'ratewindow-admin',
  })
  return {
    limiters: limitersByName(options.limiters),
    authorize,
    stats,
    basePath,
    self,
    maxBodyBytes,
    onError,
  }
}

function limitersByName(limiters: unknown): Map<string, LimiterOperator> {
  if (!Array.isArray(limiters) || limiters.length === 0)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'limiters', limiters, 'a non-empty array of RateLimiters')
  const byName = new Map<string, LimiterOperator>()
  limiters.forEach((limiter: unknown, i) => {
    const handle = handleOf(limiter, `limiters[${i}]`)
    if (byName.has(handle.limiter))
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `limiters[${i}]`,
        handle.limiter,
        'a limiter of a name no other has (the `name` option of each limiter names it in the URL)',
      )
    byName.set(handle.limiter, handle)
  })
  return byName
}

/** The operator handle of a limiter, a middleware or a handle: what has `inspect` and a limiter name. */
function handleOf(limiter: unknown, option: string): LimiterOperator {
  const isHandle = (value: unknown): value is LimiterOperator =>
    typeof (value as LimiterOperator | undefined)?.inspect === 'function' &&
    typeof (value as LimiterOperator).limiter === 'string'
  if (isHandle(limiter)) return limiter
  let handle: unknown
  try {
    // `operator`, or `overrides` (its name before 0.2) on something that has only that.
    const holder = limiter as { operator?: unknown; overrides?: unknown } | undefined
    handle = holder?.operator ?? holder?.overrides
  } catch (error) {
    // A middleware with a `rules` function has no handle before its first request: say so, naming the entry.
    throw new RateLimitError('ERR_RATEWINDOW_INVALID_OPTION', `\`${option}\`: ${(error as Error).message}`, {
      option,
      cause: error,
    })
  }
  if (isHandle(handle)) return handle
  throw invalid(
    'ERR_RATEWINDOW_INVALID_OPTION',
    option,
    limiter,
    'a RateLimiter, a middleware or its `operator`',
  )
}
