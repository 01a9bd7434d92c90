import type { OnApplicationShutdown, OnModuleInit } from '@nestjs/common'
import type { DiscoveryService, HttpAdapterHost } from '@nestjs/core'
import { HttpRateLimiter, invalid, RateLimitError, type Store } from '@ratewindow/core'
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
  name: string
  engine: HttpRateLimiter<NestHttpRequest>
}

/** Which limiters a reset reaches; without one, every limiter of the module. */
export interface ResetScope {
  /** The limiters with this name (the module's, and each controller's or handler's override of it). */
  name?: string
}

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

  constructor(options: RateWindowModuleOptions, adapterHost?: HttpAdapterHost, discovery?: DiscoveryService) {
    this.#options = options
    this.#adapterHost = adapterHost
    this.#discovery = discovery
    const { limiters, perRoute, named } = moduleLimiters(options)
    this.#limiters = limiters
    this.#perRoute = perRoute
    this.#named = named
  }

  /** The platform (from the HTTP adapter once the app has one), then every limiter of every controller. */
  onModuleInit(): void {
    this.#platformNow()
    for (const wrapper of this.#discovery?.getControllers() ?? []) {
      const controller = wrapper.metatype as Fn | null | undefined
      if (typeof controller !== 'function') continue
      const prototype = controller.prototype as Record<string, unknown>
      for (const name of methodNames(prototype)) {
        const handler = prototype[name]
        if (typeof handler === 'function') this.limitersFor(controller, handler as Fn)
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
    const skipped = [
      reflector.get<true | string[] | undefined>(SKIP_RATE_LIMIT_METADATA, handler),
      reflector.get<true | string[] | undefined>(SKIP_RATE_LIMIT_METADATA, controller),
    ]
    if (skipped.includes(true)) return []
    const skips = new Set(skipped.flatMap((each) => (Array.isArray(each) ? each : [])))
    const where = `${controller.name}.${handler.name}`
    const onClass = this.#overrides(controller, `@RateLimit() of ${controller.name}`)
    const onHandler = this.#overrides(handler, `@RateLimit() of ${where}`)
    const names = new Set([...this.#limiters.keys(), ...onClass.keys(), ...onHandler.keys()])
    const applied: AppliedLimiter[] = []
    for (const name of names) {
      if (skips.has(name)) continue
      const base = this.#limiters.get(name) ?? this.#shared(name)
      const own = onClass.get(name)
      const mine = onHandler.get(name)
      const suffix = this.#named || !this.#limiters.has(name) ? `@${name}` : ''
      if (mine !== undefined || (this.#perRoute && own === undefined)) {
        const merged =
          mine === undefined ? base : mergeOptions(own === undefined ? base : mergeOptions(base, own), mine)
        applied.push(this.#engine(handler, `${where}${suffix}`, name, merged, `@RateLimit() of ${where}`))
      } else if (own !== undefined) {
        const scope = this.#perRoute ? `${where}${suffix}` : `${controller.name}${suffix}`
        const target = this.#perRoute ? handler : controller
        applied.push(
          this.#engine(target, scope, name, mergeOptions(base, own), `@RateLimit() of ${controller.name}`),
        )
      } else {
        applied.push(this.#moduleEngine(name, base))
      }
    }
    return applied
  }

  /** Options for a limiter a `@RateLimit()` adds: the module's shared options under that name. */
  #shared(name: string): RateWindowOptions {
    const { limiters: _limiters, perRoute: _perRoute, ...shared } = this.#options
    return { ...shared, name }
  }

  /** The `@RateLimit()` options on a class or handler, by the limiter name each targets. */
  #overrides(target: Fn, where: string): Map<string, RateWindowOptions> {
    const list = reflector.get<RateWindowOptions[] | undefined>(RATE_LIMIT_METADATA, target) ?? []
    const byName = new Map<string, RateWindowOptions>()
    for (const options of list) {
      // One limiter: every `@RateLimit()` overrides it (its `name` only renames it in observer events).
      let name = this.#named ? options.name : [...this.#limiters.keys()][0]
      if (name === undefined) {
        if (this.#limiters.size > 1) {
          throw new RateLimitError(
            'ERR_RATEWINDOW_INVALID_OPTION',
            `${where} needs a \`name\`: the module has several limiters (${[...this.#limiters.keys()].join(', ')}).`,
            { option: 'name' },
          )
        }
        name = [...this.#limiters.keys()][0]!
      }
      if (typeof name !== 'string' || name === '') {
        throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'name', name, `a limiter name (${where})`)
      }
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

  #make(name: string, options: RateWindowOptions, scope: string | undefined, where: string): AppliedLimiter {
    const engine = new HttpRateLimiter(options, bindingOf(this.#platformNow()), { scope, where })
    return { name, engine }
  }

  /** Forgets `key` in every limiter, or in those of `scope`. Rejects on a store error. */
  async resetKey(key: string, scope?: ResetScope): Promise<void> {
    await Promise.all(this.#select(scope).map((engine) => engine.resetKey(key)))
  }

  /** Forgets the key of `request` in every limiter (or those of `scope`), each computing it its own way. */
  async reset(request: NestHttpRequest, scope?: ResetScope): Promise<void> {
    await Promise.all(this.#select(scope).map((engine) => engine.reset(request)))
  }

  /** The module's own limiters (what the middleware applies), made on first use. */
  moduleLimiters(): AppliedLimiter[] {
    this.#module ??= [...this.#limiters].map(([name, options]) => this.#moduleEngine(name, options))
    return this.#module
  }

  #select(scope: ResetScope | undefined): HttpRateLimiter<NestHttpRequest>[] {
    // The module's own limiters exist from the start, so that a reset before any request reaches them.
    this.moduleLimiters()
    const all = [...this.#engines.values()]
    if (scope?.name === undefined) return all.map((each) => each.engine)
    const selected = all.filter((each) => each.name === scope.name)
    if (selected.length === 0) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `No limiter is named '${scope.name}'; names: ${[...new Set(all.map((each) => each.name))].join(', ')}.`,
        { option: 'scope' },
      )
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
