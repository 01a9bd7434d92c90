/**
 * The give-back ledger: `RateLimiter.refund` and `settle` of admitted results. The calls on one result run one
 * after the other, in call order, and each sees what the previous left (`result.cost`, whether it was refunded),
 * so a result is given back at most once and two concurrent calls never give back the same units twice.
 */
import type { Rule } from '../algorithms/types.js'
import { StoreFailure, type StoreGateway } from '../gateway/store-gateway.js'
import { followCharge, type RateLimitResult, type SettleResult, shiftRemaining } from '../result.js'
import type { Charged, StoreRequest } from '../stores/types.js'
import type { BlockedCache } from './blocked-cache.js'
import type { ShadowRules } from './shadow.js'

/** A result as `refund` takes it. */
export type ResultToRefund = Pick<
  RateLimitResult,
  'key' | 'cost' | 'at' | 'allowed' | 'source' | 'shadow' | 'plan'
>

/**
 * A result as `settle` takes it: `cost` and the remaining counts follow what is given back or charged, and the waits
 * (`reset`, each rule's `reset` and `next`) what the store tells after a charge.
 */
export type ResultToSettle = ResultToRefund &
  Partial<Pick<RateLimitResult, 'remaining' | 'rules' | 'limit' | 'reset' | 'rule'>>

/** What the ledger needs of its limiter. */
export interface GiveBackParts {
  store: StoreGateway
  fallback: StoreGateway | undefined
  rules: ShadowRules
  blocked: BlockedCache | undefined
  /** The store request of `key` and `cost` under `plan` (a result's); throws for a bad key or cost. */
  request: (key: string, cost: number, plan: string | undefined) => StoreRequest
  /** The limiter's `maxDebt`: undefined, each rule's limit. */
  maxDebt: number | undefined
}

/** What one result has been through: its pending settle/refund calls, and whether it was refunded. */
interface GiveBack {
  /** Settles when the last call on the result has. */
  tail: Promise<void> | undefined
  refunded: boolean
}

/** @internal The refunds and settlements of one limiter's results. */
export class GiveBackLedger {
  readonly #parts: GiveBackParts
  /** Results being settled or refunded: their calls run one after the other (see `#inTurn`). */
  readonly #givingBack = new WeakMap<object, GiveBack>()

  constructor(parts: GiveBackParts) {
    this.#parts = parts
  }

  /** `RateLimiter.refund`: gives back an admitted request, at most once. */
  refund(result: ResultToRefund): Promise<void> {
    if (!result.allowed || result.cost === 0 || result.source === 'policy') return Promise.resolve()
    if (this.#parts.rules.chargedNothing(result)) return Promise.resolve()
    try {
      this.#parts.request(result.key, result.cost, result.plan)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#inTurn(result, (state) => this.#refund(result, state))
  }

  /** `RateLimiter.settle`: charges or gives back the difference to the actual cost. */
  async settle(result: ResultToSettle, actualCost: number): Promise<SettleResult> {
    if (!result.allowed || result.source === 'policy' || this.#parts.rules.chargedNothing(result))
      return { charged: 0, refunded: 0, uncharged: Math.max(0, actualCost - result.cost) }
    this.#parts.request(result.key, 0, result.plan)
    return this.#inTurn(result, (state) => this.#settle(result, actualCost, state))
  }

  async #refund(
    result: Pick<RateLimitResult, 'key' | 'cost' | 'at' | 'source' | 'shadow' | 'plan'>,
    state: GiveBack,
  ): Promise<void> {
    if (state.refunded) return
    // Marked before the store call: a refund that times out may still be applied by the store later.
    state.refunded = true
    if (result.cost === 0) return
    const { request, blocked, rules } = this.#parts
    const base = request(result.key, result.cost, result.plan)
    blocked?.delete(result.key)
    const gateway = this.#gatewayOf(result)
    if (gateway === undefined) return
    const sets: readonly (readonly Rule[])[] = rules.ruleSetsCharged(result)
    for (const each of sets) await gateway.refund({ ...base, rules: each, at: result.at })
  }

  async #settle(
    result: Omit<ResultToSettle, 'allowed' | 'shadow'>,
    actualCost: number,
    state: GiveBack,
  ): Promise<SettleResult> {
    const none = { charged: 0, refunded: 0, uncharged: Math.max(0, actualCost - result.cost) }
    // Refunded already: nothing of it is charged any more, and nothing more is.
    if (state.refunded || actualCost === result.cost) return none
    const gateway = this.#gatewayOf(result)
    if (gateway === undefined) return none
    const base = this.#parts.request(result.key, 0, result.plan)
    this.#parts.blocked?.delete(result.key)
    if (actualCost < result.cost) {
      const refunded = result.cost - actualCost
      const done = await gateway.refund({ ...base, cost: refunded, at: result.at })
      result.cost = actualCost
      shiftRemaining(result, refunded)
      return done ? { charged: 0, refunded, uncharged: 0 } : none
    }
    const extra = actualCost - result.cost
    // In full, as far as `maxDebt` lets each rule owe units past its limit (`Store.charge`).
    const { maxDebt } = this.#parts
    const answer = await gateway.charge(
      maxDebt === undefined ? { ...base, cost: extra } : { ...base, cost: extra, maxDebt },
    )
    if (answer === undefined) return none
    const { charged } = answer
    result.cost += charged
    shiftRemaining(result, -charged)
    if (charged > 0) await this.#waitsAfter(result, answer, gateway)
    return { charged, refunded: 0, uncharged: extra - charged }
  }

  /**
   * The settled result's waits after a charge (`followCharge`): the rules' outcomes the store answered with it, or,
   * from a store that answers none (a custom store, the Durable Object store), one peek after a charge that left a
   * rule at its limit, where the next request's wait is no longer what the decision said. A failed peek changes
   * nothing (reported as every store call).
   */
  async #waitsAfter(
    result: Omit<ResultToSettle, 'allowed' | 'shadow'>,
    answer: Charged,
    gateway: StoreGateway,
  ): Promise<void> {
    let { outcomes, now } = answer
    if (outcomes === undefined) {
      if (!result.rules?.some((rule) => rule.remaining === 0)) return
      const peeked = await gateway.decide(this.#parts.request(result.key, 1, result.plan), 'peek')
      if (peeked instanceof StoreFailure) return
      ;({ outcomes, now } = peeked)
    }
    followCharge(result, outcomes, now === undefined ? 0 : Math.max(0, now - result.at))
  }

  /** The gateway of the store that decided `result` (none for a store the limiter no longer has). */
  #gatewayOf(result: Pick<RateLimitResult, 'source'>): StoreGateway | undefined {
    return result.source === 'fallback' ? this.#parts.fallback : this.#parts.store
  }

  /**
   * Runs `call` (a settle or a refund of `result`) after the calls on the same result that came before it, so
   * that each sees what the previous left (`result.cost`, whether it was refunded): two concurrent calls never
   * give back the same units twice.
   */
  #inTurn<T>(result: object, call: (state: GiveBack) => Promise<T>): Promise<T> {
    let state = this.#givingBack.get(result)
    if (state === undefined) {
      state = { tail: undefined, refunded: false }
      this.#givingBack.set(result, state)
    }
    const own = state
    const next = own.tail === undefined ? call(own) : own.tail.then(() => call(own))
    own.tail = next.then(ignore, ignore)
    return next
  }
}

const ignore = (): void => {}
