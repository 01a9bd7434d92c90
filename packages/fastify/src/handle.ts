/** `fastify.ratewindow`: the engines of every registration on a server, and the scopes that select among them. */
import { type LimiterOperator, RateLimitError } from '@ratewindow/core'
import type { ResetScope as CoreResetScope, HttpRateLimiter } from '@ratewindow/core/adapter'
import type { FastifyInstance, FastifyRequest } from 'fastify'

/**
 * Which limiters a reset (or `operator(scope)`) reaches: core's `ResetScope` with Fastify's registrations. A
 * `route` names a route's own limiter (a route whose `config.ratewindow` sets `limit`, `window`, `algorithm`,
 * `rules`, `key`, `prefix`, `group`, `store`, `ipv6Subnet` or `name`); a route that counts in its registration's
 * budget (only `cost`, `skip`, response options…) has no limiter of its own: naming it rejects.
 */
export type ResetScope = CoreResetScope<FastifyInstance>

/**
 * `fastify.ratewindow`: forgets a client's counters, e.g. after a successful login: in every limiter of every
 * registration of the plugin on this server (the global one and each route's), or in those of a `scope`.
 */
export interface RateLimitHandle {
  /** Forgets `key` in every limiter, or in the limiters of `scope`. Rejects on a store error. */
  resetKey(key: string, scope?: ResetScope): Promise<void>
  /**
   * Forgets the key of `request` in every limiter (or those of `scope`), each computing it its own way.
   * Rejects on a store error.
   */
  reset(request: FastifyRequest, scope?: ResetScope): Promise<void>
  /**
   * Operating one key's limits live (docs/operating-limits.md): the handle of the one limiter `scope` selects (any
   * when there is only one): overrides and manual blocks (with `overrides: true`), `give`, `take`, `inspect`, `top`.
   * Throws when `scope` selects none or several.
   */
  operator(scope?: ResetScope): LimiterOperator
  /** @deprecated `operator(scope)`: the same handle; this name stays until 1.0. */
  overrides(scope?: ResetScope): LimiterOperator
  /**
   * Gives up the counters of every registration on this server to the limiters that replace them (what
   * `fastify.close()` does, with the memory stores they made for themselves). A newer limiter on the same store and
   * counters takes over anyway; an old one that decides again warns once (`RATEWINDOW_SUPERSEDED_LIMITER`).
   */
  release(): void
}

/** Where an engine belongs (its route, registration and name), for scoped resets. */
export interface EngineMembership {
  /** `'POST /login'` for a route's own limiter; undefined for a registration's global one. */
  route: string | undefined
  registration: FastifyInstance
  name: string | undefined
}

/** A route counting in its registration's budget: selected by that registration, never by its route. */
export interface SharedRoute {
  route: string
  registration: FastifyInstance
}

const SCOPE_NAMES = ['route', 'registration', 'name']

/** The decoration: the engines of every registration, until their server closes. */
export class Handle implements RateLimitHandle {
  readonly engines = new Map<HttpRateLimiter<FastifyRequest>, EngineMembership>()
  /** The routes that count in their registration's budget, for the error of a scope naming one. */
  readonly sharedRoutes = new Set<SharedRoute>()

  async resetKey(key: string, scope?: ResetScope): Promise<void> {
    await Promise.all(this.#select(scope).map((engine) => engine.resetKey(key)))
  }

  async reset(request: FastifyRequest, scope?: ResetScope): Promise<void> {
    await Promise.all(this.#select(scope).map((engine) => engine.reset(request)))
  }

  operator(scope?: ResetScope): LimiterOperator {
    return onlyOne(this.#select(scope)).operator
  }

  overrides(scope?: ResetScope): LimiterOperator {
    return this.operator(scope)
  }

  release(): void {
    for (const engine of this.engines.keys()) engine.release()
  }

  #select(scope: ResetScope | undefined): HttpRateLimiter<FastifyRequest>[] {
    if (scope === undefined) return [...this.engines.keys()]
    const unknown =
      typeof scope === 'object' && scope !== null
        ? Object.keys(scope).filter((name) => !SCOPE_NAMES.includes(name))
        : ['(not an object)']
    if (unknown.length > 0) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `A reset scope takes \`route\`, \`registration\` and \`name\`; received ${unknown.map((name) => `\`${name}\``).join(', ')}.`,
        { option: 'scope' },
      )
    }
    const { route, registration, name } = scope
    const selected = [...this.engines].filter(
      ([, each]) =>
        (route === undefined || (each.route !== undefined && routeMatches(each.route, route))) &&
        (registration === undefined || each.registration === registration) &&
        (name === undefined || each.name === name),
    )
    if (selected.length === 0) throw this.#matchesNone(scope)
    return selected.map(([engine]) => engine)
  }

  #matchesNone({ route, registration, name }: ResetScope): RateLimitError {
    const routes = [...this.engines.values()].flatMap((each) =>
      each.route === undefined ? [] : [each.route],
    )
    const own = `Routes with a limiter of their own: ${routes.length === 0 ? 'none' : routes.join(', ')}.`
    const shared =
      route === undefined
        ? []
        : [...this.sharedRoutes].filter(
            (each) =>
              routeMatches(each.route, route) &&
              (registration === undefined || each.registration === registration),
          )
    if (shared.length > 0) {
      const names = [...new Set(shared.map((each) => each.route))].join(', ')
      return new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `The reset scope's \`route\` ${JSON.stringify(route)} names no limiter: ${names} counts in its registration's budget ` +
          '(its `config.ratewindow` changes neither the rules nor the key), so it has no limiter of its own. ' +
          `Reset or operate its keys with \`{ registration }\` (the instance the plugin was registered on) or \`{ name }\`, or without a scope. ${own}`,
        { option: 'scope' },
      )
    }
    return new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `No @ratewindow/fastify limiter matches the reset scope ${JSON.stringify({ route, name })}${registration === undefined ? '' : ' in that registration'}. ${own}`,
      { option: 'scope' },
    )
  }
}

/** Whether a route (`'POST /login'`) is the one a scope names: `'POST /login'`, or `'/login'` for any method. */
function routeMatches(registered: string, named: string): boolean {
  return named.includes(' ') ? registered === named : registered.slice(registered.indexOf(' ') + 1) === named
}

/** The one engine a scope selects, for `operator`: operating a key acts on one limiter's records. */
function onlyOne<T>(selected: readonly T[]): T {
  if (selected.length === 1) return selected[0]!
  throw new RateLimitError(
    'ERR_RATEWINDOW_INVALID_OPTION',
    `\`operator(scope)\` needs the scope of one limiter; it selects ${selected.length}. Name one with \`{ route }\`, \`{ registration }\` or \`{ name }\`.`,
    { option: 'scope' },
  )
}
