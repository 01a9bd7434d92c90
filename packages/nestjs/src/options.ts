import { type HttpRateLimitOptions, RateLimitError } from '@ratewindow/core'
import { invalid, type PeerOptionName, requireObject } from '@ratewindow/core/support'
import type { NestHttpRequest, NestHttpResponse } from './binding.js'

/**
 * One limiter's options: the names and meanings of the Express, Koa and Fastify adapters. Callbacks receive the
 * platform's request; `requestWasSuccessful` takes `(statusCode)`, or `(request, response)` when it declares two
 * parameters.
 */
export type RateWindowOptions = HttpRateLimitOptions<NestHttpRequest, NestHttpResponse>

/** `RateWindowModule.forRoot` options: one limiter, or several named ones (`limiters`) sharing these defaults. */
export interface RateWindowModuleOptions extends RateWindowOptions {
  /**
   * Several limiters, each with a distinct `name`, all applied by the guard (as `ThrottlerModule.forRoot([...])`):
   * each is merged over the options beside it and counts on its own, e.g.
   * `[{ name: 'burst', limit: 10, window: '1s' }, { name: 'sustained', limit: 1000, window: '1h' }]`.
   */
  limiters?: readonly RateWindowOptions[]
  /**
   * Count each route (controller class and handler) on its own, as `@nestjs/throttler` does, instead of one
   * budget per client across the routes the guard covers. @default false
   */
  perRoute?: boolean
  /**
   * Apply the guard in GraphQL contexts too (`@nestjs/graphql`, Apollo and Mercurius drivers; tested on Nest 12):
   * each guarded resolver call is one decision of each limiter that applies, with its `cost`; the key from the
   * HTTP request of the GraphQL context (Apollo: `req`; Mercurius: `reply.request`). A refusal is a GraphQL error
   * (`extensions.code` `'RATE_LIMITED'`, `retryAfter`) with the RateLimit and `Retry-After` headers on the HTTP
   * response. Off, GraphQL resolvers pass untouched. @default false
   */
  graphql?: boolean
}

/**
 * `@RateLimit()` options: merged over the module limiter of the same `name` (over the only one when the module
 * has one and `name` is left out). With `limiters`, a `name` the module does not have adds a limiter for this
 * controller or handler alone. Without, every decorator overrides the one limiter, and its `name` names that
 * override: in observer events, `reset(request, { name })` and `@SkipRateLimit(name)`. Refuses the peers' option
 * names (`max`, `windowMs`, `ttl`, …) at compile time.
 */
export type RouteRateWindowOptions = RateWindowOptions & {
  readonly [Name in PeerOptionName | 'limiters' | 'perRoute' | 'graphql' | 'ttl']?: never
}

/** The name of the module's limiter when it has one and no `name` was given. */
export const DEFAULT_LIMITER = 'default'

const SHAPE_OPTIONS = ['limit', 'window', 'algorithm'] as const

/**
 * `override` over `base`, the way `config.ratewindow` merges over the Fastify plugin's options: a given `rules`
 * replaces an inherited `limit`/`window`/`algorithm`, and a given `limit`/`window`/`algorithm` replaces
 * inherited `rules`.
 */
export function mergeOptions(base: RateWindowOptions, override: RateWindowOptions): RateWindowOptions {
  const inherited: Record<string, unknown> = { ...base }
  if (override.rules !== undefined) for (const name of SHAPE_OPTIONS) delete inherited[name]
  if (SHAPE_OPTIONS.some((name) => override[name] !== undefined)) delete inherited.rules
  return { ...inherited, ...override } as RateWindowOptions
}

/** The module's limiters by name, each merged over the shared options; throws for bad module options. */
export function moduleLimiters(options: RateWindowModuleOptions): {
  limiters: Map<string, RateWindowOptions>
  perRoute: boolean
  /** Whether the guard applies in GraphQL contexts. */
  graphql: boolean
  /** Whether the limiters were named in `limiters` (their counters are then scoped by name). */
  named: boolean
} {
  requireObject(options, 'RateWindowModule.forRoot()', "{ limit: 100, window: '1m' }")
  const { limiters, perRoute = false, graphql = false, ...shared } = options
  if (typeof perRoute !== 'boolean') {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'perRoute', perRoute, 'true or false')
  }
  if (typeof graphql !== 'boolean') {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'graphql', graphql, 'true or false')
  }
  const byName = new Map<string, RateWindowOptions>()
  if (limiters === undefined) {
    byName.set(shared.name ?? DEFAULT_LIMITER, shared)
    return { limiters: byName, perRoute, graphql, named: false }
  }
  if (!Array.isArray(limiters) || limiters.length === 0) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'limiters',
      limiters,
      'a non-empty array of limiter options',
    )
  }
  for (const each of limiters as unknown[]) {
    requireObject(each, 'limiters[]', "{ name: 'burst', limit: 10, window: '1s' }")
    const { name } = each as RateWindowOptions
    if (typeof name !== 'string' || name === '') {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'limiters[].name',
        name,
        "a name for each limiter, e.g. 'burst'",
      )
    }
    if (byName.has(name)) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `Two limiters in \`limiters\` are named '${name}': each needs its own name.`,
        { option: 'limiters' },
      )
    }
    byName.set(name, mergeOptions(shared, each as RateWindowOptions))
  }
  return { limiters: byName, perRoute, graphql, named: true }
}
