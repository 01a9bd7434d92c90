/**
 * A limiter's local path: the decision of a store that decides in this process (MemoryStore), written into one
 * record the limiter reuses (`Store.decideInto`), and read into the result, built once. No store request, `Decision`,
 * outcome or promise is made per call. Any request the store leaves to `consume` (overrides, reservations), and any
 * call the gateway must watch, take the general path.
 */

import type { StoreGateway } from '../gateway/store-gateway.js'
import { checkedKey, type RequestBase } from '../gateway/store-request.js'
import { addWaits, fillResult, LimitResult, type RateLimitResult, type Settler } from '../result.js'
import { decisionRecord } from '../stores/local/decide.js'
import type { Store, StoreRequest } from '../stores/types.js'
import type { BlockedCache } from './blocked-cache.js'

/**
 * The local path of a limiter, when it may have one: its store decides in this process, and neither overrides (read
 * by `consume`) nor shadow rules beside enforcing ones (a second call) are configured.
 */
export function localPath(
  limiter: RequestBase & Settler & { store: Store },
  config: { overrides?: string | undefined },
  modes: { mixed: boolean },
  gateway: StoreGateway,
  blocked: BlockedCache | undefined,
): LocalPath | undefined {
  if (config.overrides !== undefined || modes.mixed || typeof limiter.store.decideInto !== 'function')
    return undefined
  return new LocalPath(limiter, gateway, limiter, blocked)
}

export class LocalPath {
  readonly #limiter: RequestBase
  readonly #gateway: StoreGateway
  readonly #settler: Settler
  /** The store writes each decision here; read into the result at once. */
  readonly #record = decisionRecord()
  /** The request of each call, filled in place: a store deciding in this process keeps nothing of it. */
  readonly #request: StoreRequest
  /** The limiter's cache of denials (none with `blockedCache: false`). */
  readonly #blocked: BlockedCache | undefined
  /** A call under way (a store's clock that decides again): the inner call takes the general path. */
  #busy = false

  constructor(
    limiter: RequestBase,
    gateway: StoreGateway,
    settler: Settler,
    blocked: BlockedCache | undefined,
  ) {
    this.#limiter = limiter
    this.#gateway = gateway
    this.#settler = settler
    this.#blocked = blocked
    const { namespace: prefix, rules, penalty } = limiter
    this.#request =
      penalty === undefined
        ? { prefix, key: '', rules, cost: 1 }
        : { prefix, key: '', rules, cost: 1, penalty }
  }

  /**
   * The result of a request of `cost` units for `key`: a cached denial, or the store's decision (a denial cached);
   * undefined when the request must take the general path. A bad key or cost throws, as `storeRequest` does.
   */
  limit(key: string, cost: number): RateLimitResult | undefined {
    key = checkedKey(this.#limiter, key, cost)
    const blocked = this.#blocked
    const cached = blocked?.get(key, cost)
    if (cached !== undefined) return cached
    const result = this.#decide(key, cost)
    if (result !== undefined && !result.allowed) blocked?.set(key, result)
    return result
  }

  #decide(key: string, cost: number): RateLimitResult | undefined {
    if (this.#busy) return undefined
    const request = this.#request
    const record = this.#record
    request.key = key
    request.cost = cost
    this.#busy = true
    let decided: boolean
    try {
      decided = this.#gateway.decideInto(request, record)
    } finally {
      this.#busy = false
    }
    if (!decided) return undefined
    const { now } = record
    const result = fillResult(
      new LimitResult(this.#settler),
      key,
      cost,
      request.rules,
      record.allowed,
      now,
      record,
      'store',
    )
    addWaits(result, now, undefined, record.blocked)
    return result
  }
}
