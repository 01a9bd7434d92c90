/**
 * Steps 4 and 5 of the HTTP engine's pipeline (engine.ts): the limiter's answer, with a place in the wait room when
 * `delay` gives one (wait-room.ts), as a decision (decision.ts), with its in-flight slot when `concurrency` is set
 * (slots.ts).
 */
import type { ConcurrencyLimiter, ConcurrencyResult } from '../limiter/concurrency.js'
import type { LimitOptions, RateLimiter } from '../limiter/limiter.js'
import type { RateLimitResult } from '../result.js'
import type { Awaitable } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { giveBack, type Reporter } from './after-response.js'
import { type FrameworkBinding, routeOf } from './binding.js'
import type { HttpConfig } from './config.js'
import type { DecisionWriter, HttpDecision } from './decision.js'
import type { LimiterChoice } from './limiter-set.js'
import { WaitRoom } from './wait-room.js'

export class AdmitStep<Req> {
  readonly #config: HttpConfig<Req>
  readonly #binding: FrameworkBinding<Req>
  readonly #writer: DecisionWriter<Req>
  /** The places of requests waiting for a reserved slot (option `delay`). */
  readonly #room: WaitRoom<Req> | undefined
  /** The in-flight slots (option `concurrency`). */
  readonly #slots: ConcurrencyLimiter | undefined
  readonly #report: Reporter
  /** Whether the observer's events want the route, read per request. */
  readonly #wantsRoute: boolean
  /** The options of each `limit` call when `cost` is a number and no observer wants the route: made once. */
  readonly #limitOptions: LimitOptions

  constructor(
    config: HttpConfig<Req>,
    binding: FrameworkBinding<Req>,
    writer: DecisionWriter<Req>,
    slots: ConcurrencyLimiter | undefined,
    report: Reporter,
  ) {
    this.#config = config
    this.#binding = binding
    this.#writer = writer
    this.#room = config.delay && new WaitRoom(config.delay, binding)
    this.#slots = slots
    this.#report = report
    this.#wantsRoute = config.limiter.observer?.onDecision !== undefined && binding.route !== undefined
    this.#limitOptions = { cost: typeof config.cost === 'number' ? config.cost : undefined }
  }

  /** Whether admitted requests hold an in-flight slot (option `concurrency`). */
  get holdsSlots(): boolean {
    return this.#slots !== undefined
  }

  /** Steps 4 and 5: the limiter's answer (with a place in the wait room, when `delay` gives one), as a decision. */
  admitted(request: Req, key: string, choice: LimiterChoice): Awaitable<HttpDecision> {
    const waiting = this.#room?.enter(key) === true
    const result = this.#limit(choice, key, request, waiting)
    const waiter = waiting ? request : undefined
    return isThenable(result)
      ? this.#decisionLater(result, choice.limiter, key, waiter)
      : this.#decision(choice.limiter, key, result, waiter)
  }

  // NOTE: continuations are methods of their own: a closure in `admitted` made a context for every request.
  #decisionLater(
    result: PromiseLike<RateLimitResult>,
    limiter: RateLimiter,
    key: string,
    waiter: Req | undefined,
  ): Promise<HttpDecision> {
    return Promise.resolve(result).then((each) => this.#decision(limiter, key, each, waiter))
  }

  /**
   * Step 4, admit: the limiter's answer. With a place in the wait room (`waiting`), a slot up to `delay.max` away
   * is reserved; without one, a request over the limit is refused as without `delay`. The place is given up when
   * the store call fails.
   */
  #limit(
    { limiter, cost, plan }: LimiterChoice,
    key: string,
    request: Req,
    waiting: boolean,
  ): Awaitable<RateLimitResult> {
    const options: LimitOptions = this.#wantsRoute
      ? { cost, route: routeOf(this.#binding, request) }
      : cost === this.#limitOptions.cost && plan === undefined
        ? this.#limitOptions
        : { cost }
    if (plan !== undefined) options.plan = plan
    return waiting ? this.#reserve(limiter, key, options) : limiter.limitNow(key, options)
  }

  /** A request with a place in the wait room: a slot is reserved; the place is given up when the store call fails. */
  #reserve(limiter: RateLimiter, key: string, options: LimitOptions): Awaitable<RateLimitResult> {
    const leave = (error: unknown) => {
      this.#room!.leave(key)
      throw error
    }
    let result: Awaitable<RateLimitResult>
    try {
      result = limiter.limitNow(key, options, this.#config.delay!.maxMs)
    } catch (error) {
      return leave(error)
    }
    return isThenable(result) ? result.then(undefined, leave) : result
  }

  /**
   * Step 5, the decision in HTTP terms (http/decision.ts), with its in-flight slot (option `concurrency`). A
   * result with a reserved slot waits for it first, when the request holds a place in the wait room (`waiting`).
   */
  #decision(
    limiter: RateLimiter,
    key: string,
    result: RateLimitResult,
    waiting: Req | undefined,
  ): Awaitable<HttpDecision> {
    if (waiting !== undefined) {
      // Shadow mode reports the slot but never waits (docs/waiting.md).
      if (result.delay !== undefined && result.shadow !== true)
        return this.#waitFor(limiter, key, result, waiting)
      this.#room!.leave(key)
    }
    const decision = this.#writer.admitted(limiter, result)
    const slots = this.#slots
    if (slots === undefined || !result.allowed) return decision
    return Promise.resolve(slots.acquire(key)).then((slot) => this.#withSlot(decision, slot))
  }

  /**
   * A request whose slot was reserved: it takes its in-flight slot first (a waiting request counts against
   * `concurrency`), then waits in the wait room. A client that disconnects meanwhile gives both back; its
   * request is answered as refused (to nobody).
   */
  async #waitFor(
    limiter: RateLimiter,
    key: string,
    result: RateLimitResult,
    request: Req,
  ): Promise<HttpDecision> {
    try {
      let decision = this.#writer.admitted(limiter, result)
      if (this.#slots !== undefined) {
        decision = this.#withSlot(decision, await this.#slots.acquire(key))
        if (!decision.result.allowed) return decision
      }
      // A client that left, or a key blocked meanwhile, gave its slot back while waiting (`waitForSlot`).
      const waited = await this.#room!.wait(limiter, result, request)
      if (waited === true) return decision
      // A release never rejects (failures go to onError).
      void decision.slot?.release()
      // Blocked by an operator while it waited: refused as a blocked key is (docs/operating-limits.md).
      return waited === false
        ? this.#writer.abandoned(limiter, result)
        : this.#writer.admitted(limiter, waited)
    } finally {
      this.#room!.leave(key)
    }
  }

  /** Adds the in-flight slot to an admitted decision; without a free slot, the request is not served, so its charge is given back. */
  #withSlot(decision: HttpDecision, slot: ConcurrencyResult): HttpDecision {
    if (!slot.allowed && decision.limiter !== undefined)
      giveBack(decision.limiter, decision.result, this.#report)
    return this.#writer.withSlot(decision, slot)
  }
}
