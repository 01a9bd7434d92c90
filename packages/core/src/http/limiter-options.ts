/**
 * HTTP-style options as a `RateLimiter`'s, for limits outside HTTP (messages on a WebSocket): one parse, the
 * HTTP adapters' (`resolveHttpOptions`).
 */
import type { RateLimiterOptions } from '../limiter/options.js'
import { invalid } from '../support/errors.js'
import { resolveHttpOptions } from './config.js'
import type { HttpRateLimitOptions } from './options.js'

/**
 * The `RateLimiter` options that HTTP-style options (`limit`, `window`, `algorithm` or `rules`, `store`, the
 * failure policy…) make, for limits outside HTTP (messages on a WebSocket): parsed by `resolveHttpOptions`, so
 * the defaults and checks are the HTTP adapters'. `limit` and `rules` must be fixed values here (no request).
 */
export function rateLimiterOptionsFrom<Req, Res = unknown>(
  options: HttpRateLimitOptions<Req, Res>,
  where = 'rateLimiterOptionsFrom()',
): RateLimiterOptions {
  const config = resolveHttpOptions(options, [], where)
  // Plans give the rules (the request's plan is the middleware's `plan`, not the limiter's).
  if (config.limiter.plans !== undefined) return { ...config.limiter }
  if (typeof config.limit !== 'number')
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'limit',
      config.limit,
      `a number (${where} has no request)`,
    )
  if (config.resolveRules !== undefined)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'rules', options.rules, `rules, not a function (${where})`)
  return { ...config.limiter, rules: config.rules ?? config.makeRule!(config.limit) }
}
