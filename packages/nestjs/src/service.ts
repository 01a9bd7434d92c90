import type { OnApplicationShutdown, OnModuleInit } from '@nestjs/common'
import type { DiscoveryService, HttpAdapterHost } from '@nestjs/core'
import { type LimiterOperator, RateLimitError, type Store } from '@ratewindow/core'
import { type ResetScope as CoreResetScope, HttpRateLimiter } from '@ratewindow/core/adapter'
import { invalid } from '@ratewindow/core/support'
import { bindingOf, type NestHttpRequest, type NestPlatform } from './binding.js'
import { RATE_LIMIT_METADATA, reflector, SKIP_RATE_LIMIT_METADATA } from './decorators.js'
import {
  DEFAULT_LIMITER,
  mergeOptions,
  moduleLimiters,
  type RateWindowModuleOptions,
  type RateWindowOptions,
} from './options.js'

/** The injection token of the module's options (`forRoot` value or `forRootAsync` factory result). */
export const RATEWINDOW_OPTIONS = 'RATEWINDOW_OPTIONS'

/** One limiter that applies to a handler: its name and the engine that counts. */
export interface AppliedLimiter {
  /** The limiter's name; without `limiters`, an override's own `name` when its decorator gives one. */
  name: string
  engine: HttpRateLimiter<NestHttpRequest>
}

/**
 * Which limiters a reset (or `operator(scope)`) reaches: core's `ResetScope`, by `name` on Nest (`route` is
 * Fastify's and rejects here). Without one, every limiter of the app: the module's (the budget every route shares
 * included) and every controller's and handler's `@RateLimit()`. A name no limiter has rejects
 * (`ERR_RATEWINDOW_UNKNOWN_LIMITER`): the module's, each controller's or handler's override of it, or the limiter a
 * `@RateLimit({ name })` adds (with `limiters`) or names (without: the override of the one limiter).
 */
export type ResetScope = CoreResetScope

// biome-ignore lint/complexity/noBannedTypes: Nest identifies controllers and handlers by their functions
type Fn = Function

/**
 * The limiters of the app, injectable anywhere (`RateWindowService`): the reset handle (e.g. forget a client's
 * counters after a successful login) and what the guard asks which limiters apply to a handler. Engines are
 * built when the app initialises, for the module and for every controller and handler with `@RateLimit()`, so
 * that bad options fail then; the stores are closed when the app shuts down.
 */
export class RateWindowService implements OnModuleInit, OnApplicationShutdown {
  readonly #options: RateWindowModuleOptions
  readonly #adapterHost: HttpAdapterHost | undefined
  readonly #discovery: DiscoveryService | undefined
  readonly #limiters: Map<string, RateWindowOptions>
  readonly #perRoute: boolean
  /** Whether the guard applies in GraphQL contexts (`graphql: true`). */
  readonly graphql: boolean
  readonly #named: boolean
  #platform: NestPlatform | undefined
  /** Engines by scope: `''` for the module's, the controller's, or the controller's and handler's names. */
  readonly #engines = new Map<string, AppliedLimiter>()
  /** Engines made for a scope, by the class or handler function (two classes may share a name). */
  readonly #byTarget = new WeakMap<Fn, Map<string, AppliedLimiter>>()
  /** The limiters of each handler, by class then handler. */
  readonly #applied = new WeakMap<Fn, WeakMap<Fn, AppliedLimiter[]>>()
  #closed = false
  #module: AppliedLimiter[] | undefined
  /** The names of the app's limiters: the module's, and those the decorators give. */
  readonly #known = new Set<string>()

  constructor(options: RateWindowModuleOptions, adapterHost?: HttpAdapterHost, discovery?: DiscoveryService) {
    this.#options = options
    this.#adapterHost = adapterHost
    this.#discovery = discovery
    const { limiters, perRoute, graphql, named } = moduleLimiters(options)
    this.#limiters = limiters
    this.#perRoute = perRoute
    this.graphql = graphql
    this.#named = named
    for (const name of limiters.keys()) this.#known.add(name)
  }

  /**
   * The platform (from the HTTP adapter once the app has one), then every limiter of every controller (and, with
   * `graphql: true`, of every resolver); a `@RateLimit()` or `@SkipRateLimit()` naming no limiter is refused here,
   * when the app starts.
   */
  onModuleInit(): void {
    this.#platformNow()
    const skips: [where: string, target: Fn][] = []
    const controllers = (this.#discovery?.getControllers() ?? []).map((wrapper) => [wrapper.metatype, false])
    const resolvers = this.graphql
      ? (this.#discovery?.getProviders() ?? []).map((wrapper) => [wrapper.metatype, true])
      : []
    for (const [metatype, resolver] of [...controllers, ...resolvers]) {
      const owner = metatype as Fn | null | undefined
      if (typeof owner !== 'function') continue
      const prototype = owner.prototype as Record<string, unknown> | undefined
      if (prototype === undefined) continue
      const handlers: [string, Fn][] = []
      for (const name of methodNames(prototype)) {
        const handler = prototype[name]
        // A provider's methods count when they resolve GraphQL fields (`@Query()`, `@Mutation()`, …).
        if (typeof handler !== 'function' || (resolver && !reflector.get(RESOLVER_TYPE, handler))) continue
        handlers.push([name, handler as Fn])
      }
      if (resolver && handlers.length === 0) continue
      skips.push([owner.name, owner])
      for (const [name, handler] of handlers) {
        this.limitersFor(owner, handler)
        skips.push([`${owner.name}.${name}`, handler])
      }
    }
    // After every controller: a name one `@RateLimit()` adds may be skipped anywhere.
    for (const [where, target] of skips) {
      const names = reflector.get<true | string[] | undefined>(SKIP_RATE_LIMIT_METADATA, target)
      for (const name of Array.isArray(names) ? names : []) {
        if (!this.#known.has(name))
          throw unknownLimiter(`\`@SkipRateLimit('${name}')\` of ${where}`, this.#known)
      }
    }
  }

  #platformNow(): NestPlatform {
    if (this.#platform === undefined) {
      const type = this.#adapterHost?.httpAdapter?.getType?.()
      if (type === undefined) return 'express'
      this.#platform = type === 'fastify' ? 'fastify' : 'express'
    }
    return this.#platform
  }

  /** The limiters that apply to a handler of a controller, in the module's order, then the overrides' new names. */
  limitersFor(controller: Fn, handler: Fn): AppliedLimiter[] {
    let byHandler = this.#applied.get(controller)
    if (byHandler === undefined) {
      byHandler = new WeakMap()
      this.#applied.set(controller, byHandler)
    }
    let applied = byHandler.get(handler)
    if (applied === undefined) {
      applied = this.#resolve(controller, handler)
      byHandler.set(handler, applied)
    }
    return applied
  }

  #resolve(controller: Fn, handler: Fn): AppliedLimiter[] {
    const where = `${controller.name}.${handler.name}`
    // Read first, so that a bad `@RateLimit()` fails at start even on a skipped handler.
    const onClass = this.#overrides(controller, `@RateLimit() of ${controller.name}`)
    const onHandler = this.#overrides(handler, `@RateLimit() of ${where}`)
    const skipped = [
      reflector.get<true | string[] | undefined>(SKIP_RATE_LIMIT_METADATA, handler),
      reflector.get<true | string[] | undefined>(SKIP_RATE_LIMIT_METADATA, controller),
    ]
    if (skipped.includes(true)) return []
    const skips = new Set(skipped.flatMap((each) => (Array.isArray(each) ? each : [])))
    const names = new Set([...this.#limiters.keys(), ...onClass.keys(), ...onHandler.keys()])
    const applied: AppliedLimiter[] = []
    for (const name of names) {
      if (skips.has(name)) continue
      const base = this.#limiters.get(name) ?? this.#shared(name)
      const own = onClass.get(name)
      const mine = onHandler.get(name)
      const suffix = this.#named || !this.#limiters.has(name) ? `@${name}` : ''
      let entry: AppliedLimiter
      if (mine !== undefined || (this.#perRoute && own === undefined)) {
        const merged =
          mine === undefined ? base : mergeOptions(own === undefined ? base : mergeOptions(base, own), mine)
        entry = this.#engine(handler, `${where}${suffix}`, name, merged, `@RateLimit() of ${where}`)
      } else if (own !== undefined) {
        const scope = this.#perRoute ? `${where}${suffix}` : `${controller.name}${suffix}`
        const target = this.#perRoute ? handler : controller
        entry = this.#engine(
          target,
          scope,
          name,
          mergeOptions(base, own),
          `@RateLimit() of ${controller.name}`,
        )
      } else {
        entry = this.#moduleEngine(name, base)
      }
      // A one-limiter module's override goes by its decorator's `name` (`entry.name`) in skips as in resets.
      if (entry.name !== name && skips.has(entry.name)) continue
      applied.push(entry)
    }
    return applied
  }

  /** Options for a limiter a `@RateLimit()` adds: the module's shared options under that name. */
  #shared(name: string): RateWindowOptions {
    const { limiters: _limiters, perRoute: _perRoute, graphql: _graphql, ...shared } = this.#options
    return { ...shared, name }
  }

  /** The `@RateLimit()` options on a class or handler, by the limiter name each targets. */
  #overrides(target: Fn, where: string): Map<string, RateWindowOptions> {
    const list = reflector.get<RateWindowOptions[] | undefined>(RATE_LIMIT_METADATA, target) ?? []
    const byName = new Map<string, RateWindowOptions>()
    const only = this.#limiters.size === 1 ? [...this.#limiters.keys()][0] : undefined
    for (const options of list) {
      let { name } = options
      if (name === undefined) {
        // With one limiter (one entry in `limiters` too), a decorator without a name overrides it.
        if (only === undefined) {
          throw new RateLimitError(
            'ERR_RATEWINDOW_INVALID_OPTION',
            `${where} needs a \`name\`: the module has several limiters (${[...this.#limiters.keys()].join(', ')}).`,
            { option: 'name' },
          )
        }
        name = only
      }
      if (typeof name !== 'string' || name === '') {
        throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'name', name, `a limiter name (${where})`)
      }
      this.#known.add(name)
      // Without `limiters`, every decorator overrides the module's one limiter, and its `name` names that
      // override (observer events, `reset(request, { name })`, `@SkipRateLimit(name)`). With `limiters`, a name
      // picks the limiter to override, and a new one adds a limiter here.
      if (!this.#named) name = only!
      byName.set(name, mergeOptions(byName.get(name) ?? {}, options))
    }
    return byName
  }

  #moduleEngine(name: string, options: RateWindowOptions): AppliedLimiter {
    const key = `@${name}`
    let entry = this.#engines.get(key)
    if (entry === undefined) {
      const scope = this.#named ? `@${name}` : undefined
      entry = this.#make(name, options, scope, 'RateWindowModule.forRoot()')
      this.#engines.set(key, entry)
    }
    return entry
  }

  #engine(
    target: Fn,
    scope: string,
    name: string,
    options: RateWindowOptions,
    where: string,
  ): AppliedLimiter {
    let byScope = this.#byTarget.get(target)
    if (byScope === undefined) {
      byScope = new Map()
      this.#byTarget.set(target, byScope)
    }
    let entry = byScope.get(scope)
    if (entry === undefined) {
      entry = this.#make(name, options, scope, where)
      byScope.set(scope, entry)
      this.#engines.set(`${scope}#${this.#engines.size}`, entry)
    }
    return entry
  }

  /** An engine, known by its options' `name` (a one-limiter module's override's own), else the limiter's. */
  #make(name: string, options: RateWindowOptions, scope: string | undefined, where: string): AppliedLimiter {
    const engine = new HttpRateLimiter(options, bindingOf(this.#platformNow()), { qualifier: scope, where })
    return { name: options.name ?? name, engine }
  }

  /** Forgets `key` in every limiter, or in those of `scope`. Rejects on a store error. */
  async resetKey(key: string, scope?: ResetScope): Promise<void> {
    await Promise.all(this.#select(scope).map((engine) => engine.resetKey(key)))
  }

  /** Forgets the key of `request` in every limiter (or those of `scope`), each computing it its own way. */
  async reset(request: NestHttpRequest, scope?: ResetScope): Promise<void> {
    await Promise.all(this.#select(scope).map((engine) => engine.reset(request)))
  }

  /**
   * Operating one key's limits live (docs/operating-limits.md): the handle of the one limiter `scope` names (any
   * when the app has one): overrides and manual blocks (with `overrides: true`), `give`, `take`, `inspect`.
   * Throws when `scope` selects none or several.
   */
  operator(scope?: ResetScope): LimiterOperator {
    const selected = this.#select(scope)
    if (selected.length === 1) return selected[0]!.operator
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`operator(scope)\` needs one limiter; ${selected.length} are selected. Name one: \`operator({ name })\`.`,
      { option: 'scope' },
    )
  }

  /** @deprecated `operator(scope)`: the same handle; this name stays until 1.0. */
  overrides(scope?: ResetScope): LimiterOperator {
    return this.operator(scope)
  }

  /** The module's own limiters (what the middleware applies), made on first use. */
  moduleLimiters(): AppliedLimiter[] {
    this.#module ??= [...this.#limiters].map(([name, options]) => this.#moduleEngine(name, options))
    return this.#module
  }

  #select(scope: ResetScope | undefined): HttpRateLimiter<NestHttpRequest>[] {
    // The module's own limiters exist from the start, so that a reset before any request reaches them.
    this.moduleLimiters()
    if (scope?.route !== undefined)
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        "A reset scope's `route` is Fastify's: on Nest, name the limiter (`{ name }`).",
        { option: 'scope.route' },
      )
    const all = [...this.#engines.values()]
    if (scope?.name === undefined) return all.map((each) => each.engine)
    const selected = all.filter((each) => each.name === scope.name)
    if (selected.length === 0) {
      const names = new Set([...this.#known, ...all.map((each) => each.name)])
      throw unknownLimiter(`A reset's \`{ name: '${scope.name}' }\``, names)
    }
    return selected.map((each) => each.engine)
  }

  /**
   * Gives up the counters (as `close()` of a middleware) and closes the stores: the memory stores the limiters
   * made, and the stores of the module's options (`store`, `fallback`), which the module owns.
   */
  async onApplicationShutdown(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    for (const { engine } of this.#engines.values()) engine.close()
    const stores = new Set<Store>()
    for (const options of [this.#options, ...(this.#options.limiters ?? [])]) {
      if (options.store !== undefined) stores.add(options.store as Store)
      if (options.fallback !== undefined) stores.add(options.fallback)
    }
    await Promise.all([...stores].map((store) => store.close?.()))
  }
}

/** What `@nestjs/graphql` marks a resolver method with (`@Query()`, `@Mutation()`, `@ResolveField()`, …). */
const RESOLVER_TYPE = 'graphql:resolver_type'

/** The error for a name no limiter of the app has, listing those it has. */
function unknownLimiter(what: string, names: Iterable<string>, hint = ''): RateLimitError {
  const known = [...names].map((name) => `'${name}'`).join(', ')
  return new RateLimitError(
    'ERR_RATEWINDOW_UNKNOWN_LIMITER',
    `${what} names no limiter of this app; its limiters: ${known}.${hint}`,
    { option: 'name' },
  )
}

/** The methods of a controller's prototype chain (not `constructor`), as Nest's `MetadataScanner` finds them. */
function methodNames(prototype: object): string[] {
  const names = new Set<string>()
  for (
    let proto: object | null = prototype;
    proto !== null && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === 'constructor') continue
      const descriptor = Object.getOwnPropertyDescriptor(proto, name)
      if (descriptor !== undefined && typeof descriptor.value === 'function') names.add(name)
    }
  }
  return [...names]
}

export { DEFAULT_LIMITER }
