/**
 * Routes that count in their registration's budget. A route whose `config.ratewindow` changes
 * neither the rules nor the key (only `cost`, `skip`, the skip-by-outcome options, the response options, `hook`…)
 * counts in the plugin's counters, as if it named the plugin's `group`: a `cost: 10` on an export route spends the
 * client's one budget ten units at a time, never a second budget of its own.
 */

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
