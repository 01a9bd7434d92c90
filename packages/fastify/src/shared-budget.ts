/**
 * Routes that count in their registration's budget (issue 45, item 21). A route whose `config.ratewindow` changes
 * neither the rules nor the key (only `cost`, `skip`, the skip-by-outcome options, the response options, `hook`…)
 * counts in the plugin's counters, as if it named the plugin's `group`: a `cost: 10` on an export route spends the
 * client's one budget ten units at a time, never a second budget of its own.
 */
import type { Store } from '@ratewindow/core'

/**
 * The route options that give a route a limiter of its own, counting apart (its route is in its namespace): those
 * that change the rules (`limit`, `window`, `algorithm`, `rules`), the key (`key`, and `ipv6Subnet`, which the
 * default key reads), or where and as what it counts (`prefix`, `group`, `store`, and `name`: a limiter's override
 * records are kept by its name, so a named route could not read the plugin's overrides and blocks).
 */
export const OWN_LIMITER_OPTIONS = [
  'limit',
  'window',
  'algorithm',
  'rules',
  'key',
  'prefix',
  'group',
  'store',
  'ipv6Subnet',
  'name',
] as const

/** Whether a route's `config.ratewindow` gives it a limiter of its own (see `OWN_LIMITER_OPTIONS`). */
export function countsApart(route: object): boolean {
  return OWN_LIMITER_OPTIONS.some((name) => (route as Record<string, unknown>)[name] !== undefined)
}

/**
 * `store` as one route of the shared budget reaches it: every call goes to `store` itself, so the route counts in
 * the plugin's counters. NOTE: a view, not the store, because core records one limiter per namespace of a store
 * object (a second one supersedes the first, which then warns, RATEWINDOW_SUPERSEDED_LIMITER); here two limiters
 * share the namespace on purpose, as a group's members do, and each view holds its own claim. A core
 * `EnginePlacement` option naming a shared owner would make this unnecessary.
 */
export function budgetView(store: Store): Store {
  const bound = new Map<PropertyKey, { method: unknown; to: unknown }>()
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target)
      if (typeof value !== 'function') return value
      // Bound once per method (the store's methods keep their `this`, private fields included).
      let entry = bound.get(property)
      if (entry === undefined || entry.method !== value) {
        entry = { method: value, to: (value as (...args: unknown[]) => unknown).bind(target) }
        bound.set(property, entry)
      }
      return entry.to
    },
  })
}
