/**
 * The compiled pipeline. At construction the engine picks, for the common configuration (one rule set, a cost that
 * is a number, no `skip`, no access list, no `delay`, no `concurrency`, no observer that wants the route), a path
 * without the steps it does not need and without a closure per request: the proxy check, the key, the limiter, the
 * decision. Those are the general pipeline's steps for that configuration, in its order (engine.ts), so the two
 * answer alike; every other configuration takes the general pipeline. `useGeneralPipeline` forces it, so that the
 * HTTP suite runs its cases on both paths.
 */
import type { LimitOptions, RateLimiter } from '../limiter/limiter.js'
import type { RateLimitResult } from '../result.js'
import { isThenable } from '../support/awaitable.js'
import type { FrameworkBinding } from './binding.js'
import type { HttpConfig } from './config.js'
import type { DecisionWriter, HttpDecision } from './decision.js'
import { type AccessGate, GONE } from './gate.js'

let general = false

/**
 * @internal Middleware built while `on` is true take the general pipeline whatever their configuration (tests of
 * both paths); each middleware picks its path once, when it is built.
 */
export function useGeneralPipeline(on: boolean): void {
  general = on
}

/** The compiled path of a middleware's configuration, or undefined when it takes the general pipeline. */
export function compiledPath<Req>(
  config: HttpConfig<Req>,
  binding: FrameworkBinding<Req>,
  limiter: RateLimiter | undefined,
  gate: AccessGate<Req>,
  writer: DecisionWriter<Req>,
): CompiledPath<Req> | undefined {
  const wantsRoute = config.limiter.observer?.onDecision !== undefined && binding.route !== undefined
  const common =
    limiter !== undefined &&
    typeof config.cost === 'number' &&
    config.enabled &&
    config.denyWhen === undefined &&
    config.skip === undefined &&
    config.allowList === undefined &&
    config.denyList === undefined &&
    config.delay === undefined &&
    config.concurrency === undefined &&
    config.plan === undefined &&
    !wantsRoute
  return common && !general ? new CompiledPath(limiter, config.cost as number, gate, writer) : undefined
}

export class CompiledPath<Req> {
  readonly #limiter: RateLimiter
  /** The options of every `limit` call: made once. */
  readonly #options: LimitOptions
  readonly #gate: AccessGate<Req>
  readonly #writer: DecisionWriter<Req>

  constructor(limiter: RateLimiter, cost: number, gate: AccessGate<Req>, writer: DecisionWriter<Req>) {
    this.#limiter = limiter
    this.#options = { cost }
    this.#gate = gate
    this.#writer = writer
  }

  /** The decision of `request`, as the general pipeline gives it; throws where its steps throw. */
  decide(request: Req): HttpDecision | Promise<HttpDecision> {
    this.#gate.checkProxy(request)
    const key = this.#gate.decisionKey(request)
    if (isThenable(key)) return this.#keyLater(key)
    return key === GONE ? this.#writer.gone(this.#limiter) : this.#decided(key)
  }

  #decided(key: string): HttpDecision | Promise<HttpDecision> {
    const limiter = this.#limiter
    const result = limiter.limitNow(key, this.#options)
    return isThenable(result) ? this.#admitLater(result) : this.#writer.admitted(limiter, result)
  }

  // NOTE: the continuations are methods of their own: a closure in `decide` would make a context per request.
  #keyLater(key: PromiseLike<string | typeof GONE>): Promise<HttpDecision> {
    return Promise.resolve(key).then((each) =>
      each === GONE ? this.#writer.gone(this.#limiter) : this.#decided(each),
    )
  }

  #admitLater(result: Promise<RateLimitResult>): Promise<HttpDecision> {
    return result.then((each) => this.#writer.admitted(this.#limiter, each))
  }
}
