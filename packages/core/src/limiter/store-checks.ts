/**
 * What a limiter's rules and options ask of its stores (`store` and `fallback`), checked at construction: a penalty
 * needs a store that keeps penalties, a quota rule one that decides with its calendar periods.
 */
import type { Penalty } from '../algorithms/penalty.js'
import type { Rule } from '../algorithms/types.js'
import { MemoryStore } from '../stores/local/memory.js'
import type { Store } from '../stores/types.js'
import { RateLimitError } from '../support/errors.js'
import { emitWarning } from '../support/runtime.js'

/** Refuses, naming `option`, a `store` or `fallback` that lacks what `needs` asks (`what` says it). */
function requireOfStores(
  store: Store,
  fallback: Store | undefined,
  needs: (store: Store) => boolean,
  what: string,
  option: string,
): void {
  for (const [name, target] of [
    ['store', store],
    ['fallback', fallback],
  ] as const) {
    if (target !== undefined && !needs(target)) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `${what}; the \`${name}\` (${target.constructor?.name ?? typeof target}) does not.`,
        { option },
      )
    }
  }
}

/** Stores already warned that they may evict a quota's state (`RATEWINDOW_QUOTA_EVICTION`), once each. */
const warnedEviction = new WeakSet<Store>()

/**
 * The stores of a limiter checked against its penalty and rules: a penalty needs `penalties: true`; a quota rule
 * needs `quotas: true` (MemoryStore, RedisStore, SyncedStore), and a MemoryStore left at its default `maxKeys`, past
 * which it drops keys, warns once that a quota's count would restart (a store given its `maxKeys` was sized on purpose).
 */
export function checkStores(
  store: Store,
  fallback: Store | undefined,
  penalty: Penalty | undefined,
  rules: readonly Rule[],
  planned = false,
): void {
  if (planned) {
    requireOfStores(
      store,
      fallback,
      (target) => target.plans === true,
      "`plans` needs a store that records the plan in force beside the key's state (MemoryStore, RedisStore, SyncedStore)",
      'plans',
    )
  }
  if (penalty !== undefined) {
    requireOfStores(
      store,
      fallback,
      (target) => target.penalties === true,
      '`penalty` needs a store that keeps penalties beside the rule state (MemoryStore, RedisStore)',
      'penalty',
    )
  }
  if (!rules.some((rule) => rule.periods !== undefined)) return
  requireOfStores(
    store,
    fallback,
    (target) => target.quotas === true,
    'A `quota` rule needs a store that decides with its calendar periods (MemoryStore, RedisStore, SyncedStore)',
    'rules',
  )
  for (const target of [store, fallback]) {
    if (target instanceof MemoryStore && !target.maxKeysGiven && !warnedEviction.has(target)) {
      warnedEviction.add(target)
      emitWarning(
        `A \`quota\` rule counts on a MemoryStore that forgets its least recently used keys past its default \`maxKeys\` (${target.maxKeys}): a customer's count for the period restarts from zero when its key is dropped. Give the store a \`maxKeys\` above the customers it serves, or keep quotas in a Redis under the \`noeviction\` policy (docs/plans-and-quotas.md).`,
        'RATEWINDOW_QUOTA_EVICTION',
      )
    }
  }
}
