import {
  type Duration,
  invalid,
  MemoryStore,
  namesOf,
  RateLimiter,
  rejectUnknownOptions,
  requireObject,
  slidingWindowCounter,
} from '@ratewindow/core'
import { AdminStats } from './stats.js'
import { isFunction, positiveWhole } from './validate.js'

/** What the endpoint needs of a limiter: a `RateLimiter` fits. */
export type AdminLimiter = Pick<RateLimiter, 'name' | 'rules' | 'overrides' | 'reset'>

/**
 * What `authorize` answers: `true`, or the caller's name (the actor, passed into the limiters' override events),
 * lets the request in; anything else refuses it (401 without an `Authorization` header, else 403).
 */
export type Authorization = boolean | string | null | undefined

/** Options of `adminHandler()`. */
export interface AdminHandlerOptions {
  /** The limiters it operates, each by its `name` (`/limiters/:name/…`). */
  limiters: readonly AdminLimiter[]
  /**
   * Runs first for every request (after the endpoint's own limit): `true` or an actor name lets it in. Required:
   * the endpoint refuses to start without it.
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
  limiters: ReadonlyMap<string, AdminLimiter>
  authorize: AdminHandlerOptions['authorize']
  stats: AdminStats | undefined
  basePath: string
  /** The endpoint's own limit: a RateLimiter on a MemoryStore of its own. */
  self: RateLimiter
  maxBodyBytes: number
  onError: ((error: unknown) => void) | undefined
}

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
export function resolveAdminOptions(options: AdminHandlerOptions): AdminConfig {
  requireObject(options, 'options', '{ limiters: [api], authorize }')
  rejectUnknownOptions(options, OPTIONS, 'adminHandler')
  const {
    authorize,
    stats,
    basePath = '',
    limit = 300,
    window = '1m',
    maxBodyBytes = 16_384,
    onError,
  } = options
  isFunction(
    authorize,
    'authorize',
    'a function of the request answering true or an actor name: the admin endpoint never starts open',
  )
  if (stats !== undefined && !(stats instanceof AdminStats))
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'stats', stats, 'what adminStats() returns')
  if (
    typeof basePath !== 'string' ||
    (basePath !== '' && (!basePath.startsWith('/') || basePath.endsWith('/')))
  )
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'basePath',
      basePath,
      "'' or a path such as '/_ratewindow'",
    )
  positiveWhole(maxBodyBytes, 'maxBodyBytes')
  if (onError !== undefined) isFunction(onError, 'onError', 'a function')
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

function limitersByName(limiters: unknown): Map<string, AdminLimiter> {
  if (!Array.isArray(limiters) || limiters.length === 0)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'limiters', limiters, 'a non-empty array of RateLimiters')
  const byName = new Map<string, AdminLimiter>()
  limiters.forEach((limiter: AdminLimiter, i) => {
    if (typeof limiter?.name !== 'string' || typeof limiter.overrides?.inspect !== 'function')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', `limiters[${i}]`, limiter, 'a RateLimiter')
    if (byName.has(limiter.name))
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `limiters[${i}]`,
        limiter.name,
        'a limiter of a name no other has (the `name` option of each RateLimiter names it in the URL)',
      )
    byName.set(limiter.name, limiter)
  })
  return byName
}
