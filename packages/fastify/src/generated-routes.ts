/**
 * The routes Fastify generates from one route declaration, which count in the declared route's limiter: the HEAD
 * route it adds for a GET (`exposeHeadRoutes`), and, for a `'/'` route in a plugin registered with a `prefix`, the
 * HEAD route of the trailing-slash URL (`'/api/'` beside `'/api'`; the GET of `'/api/'` takes the declared route's
 * hooks without an `onRoute`). Fastify adds each one synchronously, right after the route it comes from, with the
 * same `config.ratewindow` object: that is how they are recognised (not by the handler, which another plugin's
 * `onRoute` hook may wrap anew for each route).
 */
import type { RouteOptions } from 'fastify'

/** What `onRoute` receives: the route's options, with the URL parts Fastify adds. */
type AddedRoute = RouteOptions & { prefix?: string; routePath?: string }

/** What identifies a declared route, read when it is declared: Fastify goes on changing its options object. */
interface Declared<T> {
  methods: readonly string[]
  url: string
  routePath: string | undefined
  options: unknown
  given: T
}

/** The routes generated from the last route declared, with what that route was given (its limiter). */
export class GeneratedRoutes<T> {
  #declared: Declared<T> | undefined

  /**
   * What the declared route that `route` was generated from was given, in a box; undefined for a route declared
   * by the application (which the caller then notes with `declare`).
   */
  sourceOf(route: AddedRoute): { given: T } | undefined {
    const declared = this.#declared
    return declared !== undefined && generatedFrom(route, declared) ? declared : undefined
  }

  /** Notes a declared route and what it was given, for the routes Fastify generates from it next. */
  declare(route: AddedRoute, given: T): void {
    const { method, url, routePath } = route
    const methods = Array.isArray(method) ? method : [method]
    this.#declared = { methods, url, routePath, options: optionsOf(route), given }
  }
}

/** Whether `route` is a HEAD route Fastify generated from the GET route `declared`. */
function generatedFrom(route: AddedRoute, declared: Declared<unknown>): boolean {
  if (route.method !== 'HEAD' || !declared.methods.includes('GET')) return false
  if (optionsOf(route) !== declared.options) return false
  // A prefixed '/' declared as '/api' (its `routePath` is ''): Fastify also answers '/api/' for it.
  return route.url === declared.url || (declared.routePath === '' && route.url === `${declared.url}/`)
}

/** The route's `config.ratewindow` object (Fastify copies a generated route's options, not this object). */
function optionsOf(route: AddedRoute): unknown {
  return (route.config as { ratewindow?: unknown } | undefined)?.ratewindow
}
