/**
 * `slowDown()`, the part every adapter shares: express-slow-down 2's model on ratewindow's stores. Every request
 * of a client is counted in a fixed window of `windowMs`; those after the first `delayAfter` wait `delayMs`
 * (a number, or a function of the count), at most `maxDelayMs`, then go on. No request is refused for its count;
 * one is refused only when too many delayed requests wait already (`maxPerKey`, `maxWaiting`).
 *
 * This file computes the delays and runs them; the options are resolved in slow-down/options.ts, and the counting
 * engine is built in slow-down/call-binding.ts.
 */

import { giveBack, refundAfterResponse } from '../http/after-response.js'
import type { Defer, TrackedResponse } from '../http/binding.js'
import { type FrameworkBinding, routeOf } from '../http/binding.js'
import type { HttpDecision } from '../http/decision.js'
import type { HttpRateLimiter } from '../http/engine.js'
import { WaitingPlaces } from '../http/wait-room.js'
import type { FailureContext } from '../limiter/options.js'
import { type DecisionEvent, type DecisionOutcome, decisionEvent } from '../observe.js'
import type { Awaitable } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { invalid } from '../support/errors.js'
import { guardedObserver, guardedReporter, throttledErrorLog } from '../support/report.js'
import { type DelayQueue, delayQueueOf } from '../time/delay-queue.js'
import { countingEngine, type SlowDownCall } from './call-binding.js'
import { refusalAfter, type SlowDownDecision, type SlowDownInfo, type SlowDownRefusal } from './decision.js'
import { DelayedRun } from './delayed-run.js'
import { checkDelay, resolveSlowDownOptions, type SlowDownConfig, type SlowDownOptions } from './options.js'

/**
 * The engine of every adapter's `slowDown()`: its options resolved once (slow-down/options.ts), it counts and
 * computes each request's delay, with a place among the delayed requests or a refusal past their bounds
 * (`decide`), then runs it after the delay unless its client leaves first (`proceed`). The counting is a
 * `HttpRateLimiter` (slow-down/call-binding.ts); the places are the wait room's (http/wait-room.ts); the waiting
 * is one shared timer (delay-queue.ts); the refund after the response is the HTTP engine's (http/after-response.ts).
 */
export class SlowDownEngine<Req, Args extends unknown[], Res = Args[1]> {
  readonly #config: SlowDownConfig<Args>
  readonly #counter: HttpRateLimiter<SlowDownCall<Req, Args>>
  readonly #binding: FrameworkBinding<Req>
  readonly #queue: DelayQueue
  /** The places of this middleware's delayed requests, bounded by `maxPerKey` and `maxWaiting`. */
  readonly #places: WaitingPlaces
  /** Each delayed request's run after its delay (delayed-run.ts). */
  readonly #runs: DelayedRun<Req>
  readonly #onDecision: ((event: DecisionEvent) => void) | undefined
  readonly #report: (error: unknown, context: FailureContext) => void

  constructor(
    options: SlowDownOptions<Args, Res> = {},
    binding: FrameworkBinding<Req>,
    adapterNames: readonly string[] = [],
    where = 'slowDown()',
  ) {
    const config = resolveSlowDownOptions(options, adapterNames, where)
    this.#config = config
    this.#queue = delayQueueOf(config.timers)
    this.#places = new WaitingPlaces(config.bounds)
    this.#binding = binding
    this.#onDecision = guardedObserver(options.observer?.onDecision, 'onDecision')
    // The default log names the middleware as its user knows it, not by its (hashed) namespace in the store.
    const onError =
      options.onError ?? throttledErrorLog(options.name === undefined ? where : `limiter ${options.name}`)
    this.#report = guardedReporter(onError)
    this.#counter = countingEngine(options, config.windowMs, binding, where, onError)
    // A request dropped before its handler ran: with `skipFailedRequests`, its count is taken back.
    this.#runs = new DelayedRun(binding, this.#queue, this.#places, (decision, defer) => {
      if (config.skipFailedRequests) this.#refund(decision, defer)
    })
  }

  /** Where the counts live in the store. */
  get namespace(): string {
    return this.#counter.namespace
  }

  /**
   * Counts the request and computes its delay; undefined when `skip` says so. A delayed request takes a place
   * among the delayed ones, which `proceed` gives back, or is refused (`refusal`) past `maxPerKey` or
   * `maxWaiting`. Rejects (or throws) when a callback throws or returns a bad value: adapters pass that to the
   * framework's error handling.
   */
  decide(request: Req, args: Args): Awaitable<SlowDownDecision<Req> | undefined> {
    const decided = this.#counter.decideNow({ request, args })
    if (decided instanceof Promise) return decided.then((each) => this.#counted(request, args, each))
    return this.#counted(request, args, decided)
  }

  /**
   * A request whose client left before it was counted (`gone`) is not counted and goes no further: it is refused,
   * to nobody (the adapter answers a closed connection), so that no handler runs for it.
   */
  #counted(
    request: Req,
    args: Args,
    decision: HttpDecision | undefined,
  ): Awaitable<SlowDownDecision<Req> | undefined> {
    if (decision === undefined) return undefined
    if (decision.gone) return { info: goneInfo(), decision, request, refusal: refusalAfter(0), gone: true }
    return this.#delay(request, args, decision)
  }

  #delay(request: Req, args: Args, decision: HttpDecision): Awaitable<SlowDownDecision<Req>> {
    const after = this.#config.delayAfter
    const delayAfter = typeof after === 'function' ? after(...args) : after
    if (isThenable(delayAfter))
      return Promise.resolve(delayAfter).then((each) => this.#withDelayAfter(request, args, decision, each))
    return this.#withDelayAfter(request, args, decision, delayAfter)
  }

  #withDelayAfter(
    request: Req,
    args: Args,
    decision: HttpDecision,
    delayAfter: unknown,
  ): Awaitable<SlowDownDecision<Req>> {
    checkDelay(delayAfter, 'delayAfter', true, 'returned by `delayAfter`')
    const { result } = decision
    // The failure policy knows no count: the request goes on at once.
    const counted = result.source !== 'policy'
    const used = !counted ? 0 : result.allowed ? result.limit - result.remaining : result.limit + result.cost
    const info: SlowDownInfo = {
      limit: delayAfter,
      used,
      remaining: Math.max(0, delayAfter - used),
      resetTime: counted && result.reset > 0 ? new Date(result.at + result.reset) : undefined,
      delay: 0,
      key: result.key,
    }
    if (used <= delayAfter) return this.#decided(request, decision, info)
    const { delayMs } = this.#config
    const unbounded =
      delayMs === undefined
        ? (used - delayAfter) * 1000
        : typeof delayMs === 'function'
          ? delayMs(used, ...args)
          : delayMs
    const max = this.#config.maxDelayMs
    const maxDelay = typeof max === 'function' ? max(...args) : max
    if (isThenable(unbounded) || isThenable(maxDelay)) {
      return Promise.all([unbounded, maxDelay]).then(([each, most]) =>
        this.#decided(request, decision, info, each, most),
      )
    }
    return this.#decided(request, decision, info, unbounded, maxDelay)
  }

  #decided(
    request: Req,
    decision: HttpDecision,
    info: SlowDownInfo,
    unbounded: unknown = 0,
    maxDelay: unknown = 0,
  ): SlowDownDecision<Req> {
    if (info.used > info.limit) {
      checkDelay(unbounded, 'delayMs', false, 'returned by `delayMs`', true)
      checkDelay(maxDelay, 'maxDelayMs', false, 'returned by `maxDelayMs`')
      const delay = Math.max(0, Math.min(unbounded as number, maxDelay as number))
      if (!Number.isFinite(delay)) {
        throw invalid(
          'ERR_RATEWINDOW_INVALID_OPTION',
          'delayMs',
          unbounded,
          'a finite number of ms (returned by `delayMs`), or a finite `maxDelayMs`',
        )
      }
      info.delay = Math.round(delay)
    }
    const decided: SlowDownDecision<Req> = { info, decision, request }
    // The place is taken in the step that checks the bounds: concurrent requests cannot all pass them.
    if (info.delay > 0 && !this.#places.enter(decision.result.key)) decided.refusal = refusalAfter(info.delay)
    if (this.#onDecision !== undefined) this.#observe(decided)
    return decided
  }

  #observe({ request, decision, info, refusal }: SlowDownDecision<Req>): void {
    const { result } = decision
    const outcome: DecisionOutcome =
      result.source === 'policy'
        ? 'failed-open'
        : refusal !== undefined
          ? 'shed'
          : info.delay > 0
            ? 'delayed'
            : 'allowed'
    const limiter = decision.limiter?.name ?? ''
    this.#onDecision!(
      decisionEvent(limiter, result.rule.name, outcome, result, routeOf(this.#binding, request)),
    )
  }

  /**
   * Runs `proceed` (the rest of the chain) after the request's delay, at once when it has none, and gives its
   * place back. A client that leaves while delayed (its connection closes: the binding's `onClose`, else
   * `response` closes) is dropped: its wait is cancelled, `proceed` never runs, and `abandon` runs instead (the
   * adapter ends its part of the request). Arms `skipFailedRequests` and `skipSuccessfulRequests` on `response`;
   * `args` go to `requestWasSuccessful`. `defer` keeps a refund after the response alive (`executionCtx.waitUntil`
   * on Workers). Not for a refused decision (`refusal`): the adapter answers that one.
   *
   * A request whose connection is stalled when its delay ends (the binding's `stalled`: a client that pipelined
   * more than the server answers, whose leaving cannot be heard) is refused then: `proceed` gets the refusal,
   * which the adapter answers as one from `decide`, running nothing more. An adapter that ignores the argument
   * runs the request as before.
   */
  proceed(
    decided: SlowDownDecision<Req>,
    args: Args,
    response: TrackedResponse,
    proceed: (refusal?: SlowDownRefusal) => void,
    abandon?: () => void,
    defer?: Defer,
  ): void {
    const { decision } = decided
    const state = { ran: decided.info.delay <= 0 }
    const { skipFailedRequests, skipSuccessfulRequests } = this.#config
    if (skipFailedRequests || skipSuccessfulRequests) this.#track(decision, args, response, state, defer)
    if (state.ran) {
      proceed()
      return
    }
    this.#runs.start(decided, state, response, proceed, abandon, defer)
  }

  /** Delayed requests of this middleware waiting now. */
  get waiting(): number {
    return this.#places.size
  }

  /**
   * Arms the refund after the response (http/after-response.ts) for a request whose handler ran: a request
   * dropped while delayed is handled by `DelayedRun`.
   */
  #track(
    decision: HttpDecision,
    args: Args,
    response: TrackedResponse,
    state: { ran: boolean },
    defer: Defer | undefined,
  ): void {
    const { requestWasSuccessful, skipFailedRequests, skipSuccessfulRequests } = this.#config
    refundAfterResponse(response, {
      skipFailedRequests,
      skipSuccessfulRequests,
      // A two-parameter check gets the callbacks' first two arguments: the request and the response (Koa and
      // Hono, whose callbacks get one, wrap it to hand it theirs).
      wasSuccessful: () => requestWasSuccessful(response.statusCode, args[0], args[1]),
      judged: () => state.ran,
      refund: () => this.#refund(decision, defer),
      report: (error) => this.#report(error, { operation: 'refund', key: decision.result.key }),
      defer,
    })
  }

  #refund({ limiter, result }: HttpDecision, defer: Defer | undefined): void {
    if (limiter !== undefined) giveBack(limiter, result, this.#report, defer)
  }

  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void> {
    return this.#counter.resetKey(key)
  }

  /** Gives up the counters (see `HttpRateLimiter.close`) and closes the memory store made for itself. */
  close(): void {
    this.#counter.close()
  }
}

/** The info of a request whose client left before it was counted: nothing counted, no key. */
function goneInfo(): SlowDownInfo {
  return { limit: 0, used: 0, remaining: 0, resetTime: undefined, delay: 0, key: '' }
}
