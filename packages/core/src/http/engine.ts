/**
 * `HttpRateLimiter`, the framework-neutral middleware engine: options are resolved once (http/config.ts);
 * adapters read the request, call `decideNow`, and write what it returns. This file is the request pipeline;
 * each of its other jobs is a unit of its own in http/ (limiters, wait room, slots, decisions, refunds, warnings).
 */
import type { LimiterOperator } from '../operator/operator.js'
import type { Awaitable } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { RateLimitError } from '../support/errors.js'
import { guardedReporter, throttledErrorLog } from '../support/report.js'
import { AdmitStep } from './admit-step.js'
import { giveBack, type Reporter, refundAfterResponse } from './after-response.js'
import type { Defer, EnginePlacement, FrameworkBinding, TrackedResponse } from './binding.js'
import { renderBody } from './body.js'
import { type CompiledPath, compiledPath } from './compiled.js'
import { type HttpConfig, resolveHttpOptions } from './config.js'
import { DecisionWriter, type HttpDecision } from './decision.js'
import { AccessGate, ALLOWED_IP, GO_ON, GONE, type Passage } from './gate.js'
import { type HeaderFields, headerFields, noteHeaderFields, shapesMayMix } from './header-mix.js'
import { LimiterSet } from './limiter-set.js'
import type { HttpRateLimitOptions } from './options.js'
import { PerRequestWatch } from './per-request.js'
import { holdSlot, slotLimiter } from './slots.js'
import { step } from './step.js'

/**
 * The framework-neutral middleware engine: each request goes through one pipeline, gate → key → limiters →
 * admit → decision (`decideNow`), synchronous as long as every step answers at once.
 */
export class HttpRateLimiter<Req, Res = unknown> {
  readonly #config: HttpConfig<Req>
  readonly #binding: FrameworkBinding<Req>
  readonly #limiters: LimiterSet<Req>
  readonly #writer: DecisionWriter<Req>
  readonly #gate: AccessGate<Req>
  /** Steps 4 and 5: the limiter's answer, the wait room (option `delay`) and the in-flight slots (admit-step.ts). */
  readonly #admit: AdmitStep<Req>
  /** Reports to `onError`, which cannot throw or reject into the request (report.ts guardedReporter). */
  readonly #report: Reporter
  /** The store this middleware made (no `store` option), which `close` closes. */
  readonly #ownStore: unknown
  /** Recognises a middleware built for each request, at its first decision (http/per-request.ts). */
  readonly #perRequest: PerRequestWatch
  /** The RateLimit fields this middleware writes (none with `headers: false`). */
  readonly #headerFields: HeaderFields | undefined
  /** The path of a common configuration, when this middleware's is one (compiled.ts). */
  readonly #compiled: CompiledPath<Req> | undefined

  constructor(
    options: HttpRateLimitOptions<Req, Res> = {},
    binding: FrameworkBinding<Req>,
    placement: EnginePlacement = {},
  ) {
    const config = resolveHttpOptions(options, binding.options, placement.where)
    this.#config = config
    this.#binding = binding
    this.#ownStore = options.store === undefined ? config.limiter.store : undefined
    this.#perRequest = new PerRequestWatch(placement.where ?? 'rateLimit()', options.store === undefined)
    this.#report = guardedReporter(config.limiter.onError ?? throttledErrorLog())
    this.#writer = new DecisionWriter(config, binding)
    this.#limiters = new LimiterSet(config, {
      qualifier: placement.qualifier ?? placement.scope,
      owner: placement.owner ?? this,
      dynamicLimit: typeof config.limit === 'function',
      sharing: placement.sharing,
    })
    this.#gate = new AccessGate(config, binding, this.#writer, () => this.#limiters.first)
    const slots = config.concurrency && slotLimiter(config, this.#limiters.baseNamespace)
    this.#admit = new AdmitStep(config, binding, this.#writer, slots, this.#report)
    this.#limiters.refuseImpossible()
    // An adapter that shows one limiter's fields per answer never mixes two shapes (http/shown-fields.ts).
    this.#headerFields =
      binding.showsOneQuota === true ? undefined : headerFields(config.headers, config.legacyHeaders)
    this.#compiled = compiledPath(config, binding, this.#limiters.fixed, this.#gate, this.#writer)
  }

  /**
   * `decide` for adapters: the decision itself when nothing on its way was asynchronous (the memory store,
   * synchronous callbacks), else a promise of it. Never throws: a failing callback gives a rejected promise.
   */
  decideNow(request: Req): HttpDecision | undefined | Promise<HttpDecision | undefined> {
    const decision = this.#pipeline(request)
    // Only while limiters of two header shapes exist in the process (http/header-mix.ts).
    return this.#headerFields !== undefined && shapesMayMix() ? this.#noted(request, decision) : decision
  }

  // NOTE: a method of its own: the closure in `decideNow` made a context for every request.
  #noted(request: Req, decision: Awaitable<HttpDecision | undefined>): Awaitable<HttpDecision | undefined> {
    return step(decision, (each) => this.#noteHeaders(request, each))
  }

  /**
   * Steps 1 to 5 of `decideNow`: 1. gate: deny lists, skip, allow lists (http/gate.ts); 2. key (none for a client
   * gone: not decided); 3. limiters (http/limiter-set.ts); 4. admit: the limiter's answer, with a place in the
   * wait room (http/admit-step.ts); 5. decision (http/decision.ts).
   * NOTE: each step is a method that forks on a promise itself, not a `step()` callback: those made four
   * closures (and their contexts) per request, which only the asynchronous path needs.
   */
  #pipeline(request: Req): HttpDecision | undefined | Promise<HttpDecision | undefined> {
    try {
      if (!this.#config.enabled) return undefined
      if (this.#perRequest.watching)
        this.#perRequest.first(this.#binding.app?.(request), this.#limiters.baseNamespace)
      const compiled = this.#compiled
      if (compiled !== undefined) return compiled.decide(request)
      const passage = this.#gate.pass(request)
      return isThenable(passage)
        ? Promise.resolve(passage).then((each) => this.#keyed(request, each))
        : this.#keyed(request, passage)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Step 2, the key of a request the gate let on. */
  #keyed(request: Req, passage: Passage): Awaitable<HttpDecision | undefined> {
    if (passage !== GO_ON && passage !== ALLOWED_IP) return passage
    const key = this.#gate.decisionKey(request)
    return isThenable(key)
      ? Promise.resolve(key).then((each) => this.#limited(request, passage, each))
      : this.#limited(request, passage, key)
  }

  /** Step 3, the access lists by key, then the limiter and cost of the request. */
  #limited(
    request: Req,
    passage: typeof GO_ON | typeof ALLOWED_IP,
    key: string | typeof GONE,
  ): Awaitable<HttpDecision | undefined> {
    if (key === GONE) return this.#writer.gone(this.#limiters.first)
    const listed = this.#gate.passKey(key, passage)
    if (listed !== GO_ON) return listed
    const choice = this.#limiters.choose(request)
    return isThenable(choice)
      ? Promise.resolve(choice).then((each) => this.#admit.admitted(request, key, each))
      : this.#admit.admitted(request, key, choice)
  }

  /** Notes which header fields answer `request`, for the warning about two shapes on one response. */
  #noteHeaders(request: Req, decision: HttpDecision | undefined): HttpDecision | undefined {
    // A decision without a quota (the failure policy, a shed, a deny-listed client) writes no RateLimit field.
    if (decision?.limiter !== undefined && decision.headers['RateLimit-Policy'] !== undefined)
      noteHeaderFields(request, this.#headerFields!, decision.limiter.name)
    return decision
  }

  /**
   * Decides for one request; undefined when `skip` says so. Rejects when a user callback (`skip`, `key`,
   * `cost`, `limit`, `rules`) throws or returns a bad value: adapters pass that to the framework's error handling.
   */
  decide(request: Req): Promise<HttpDecision | undefined> {
    return Promise.resolve(this.decideNow(request))
  }

  /**
   * Where the counters of this middleware live in its store (see docs/counters.md). With a `rules` function,
   * each rule set has its own: this is the first one resolved ('' before any request).
   */
  get namespace(): string {
    return this.#limiters.first?.namespace ?? ''
  }

  /**
   * Gives up this middleware's claims on its namespaces (e.g. when a Fastify instance closes). A middleware built
   * later on the same store and namespace takes them over anyway; this one, if it still decides, then warns once
   * (`RATEWINDOW_SUPERSEDED_LIMITER`, docs/counters.md).
   */
  release(): void {
    for (const limiter of this.#limiters.all()) limiter.release()
  }

  /**
   * For an app that goes (a test's app, a reloaded module, shutdown): `release()`, and the memory store this
   * middleware made for itself (no `store` option) is closed. A store you passed is yours to close. The middleware
   * keeps answering requests.
   */
  close(): void {
    this.release()
    ;(this.#ownStore as { close?: () => void } | undefined)?.close?.()
  }

  /**
   * Forgets `key` in every counter of this middleware (each rule set it has used), e.g. after a successful
   * login. Store errors reject: the caller decides.
   */
  async resetKey(key: string): Promise<void> {
    await Promise.all([...this.#limiters.all()].map((limiter) => limiter.reset(key)))
  }

  /**
   * Operating one key's limits live (docs/operating-limits.md): the handle of this middleware's limiter (with a
   * `limit` or `rules` function, of its first one: every limiter of the middleware reads the same records).
   */
  get operator(): LimiterOperator {
    const first = this.#limiters.first
    if (first !== undefined) return first.operator
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'A middleware with a `rules` function has no limiter before its first request, so no `operator` handle yet: make a `RateLimiter` with the same `prefix` and `name` (or `group`) and `overrides: true` to operate its keys.',
      { option: 'rules' },
    )
  }

  /** @deprecated `operator`: the same handle; this name stays until 1.0. */
  get overrides(): LimiterOperator {
    return this.operator
  }

  /** Forgets the key of `request` (as `key`, or the client IP, would give it); rejects as `resetKey` does. */
  async reset(request: Req): Promise<void> {
    await this.resetKey(await this.#gate.key(request))
  }

  /**
   * After `req.rateLimit.settle(n)` changed the charge, the RateLimit headers follow the settled result, as long
   * as they have not been sent (the binding's `writeHeaders` on `target`). Adapters call it for an admitted
   * decision after setting its headers; it costs two field writes, no closure.
   */
  followSettle(decision: HttpDecision, target: unknown): void {
    this.#writer.follow(decision, target)
  }

  /** The body of a denial: `message`, problem details, or the default JSON (http/body.ts). */
  body(
    request: Req,
    { result, statusCode }: HttpDecision,
  ): Promise<{ contentType: string; payload: string }> {
    return renderBody(this.#config, request, result, statusCode)
  }

  /** Whether admitted requests hold an in-flight slot (option `concurrency`) that `track` arms. */
  get holdsSlots(): boolean {
    return this.#admit.holdsSlots
  }

  /**
   * Arms, on the raw response, the refund of `skipFailedRequests`/`skipSuccessfulRequests` (http/after-response.ts)
   * and the release of the request's in-flight slot (http/slots.ts: when the handler's work is done, not when the
   * client leaves). Only a response that was completely sent is judged for a refund: a client that disconnects
   * first gets nothing back, since the handler may have run for it (docs/counters.md). `request` and `reply` are
   * what a two-parameter `requestWasSuccessful` receives: the request and response as the adapter's users know
   * them (Express's `req` and `res`, Fastify's `request` and `reply`, …).
   */
  track(response: TrackedResponse, decision: HttpDecision, defer?: Defer, request?: Req, reply?: Res): void {
    const { limiter, result, slot } = decision
    const config = this.#config
    if (slot !== undefined)
      decision.hold = holdSlot(response, slot, config.concurrency?.releaseOnClose === true, defer)
    const { skipFailedRequests, skipSuccessfulRequests } = config
    if (!result.allowed || limiter === undefined || (!skipFailedRequests && !skipSuccessfulRequests)) return
    refundAfterResponse(response, {
      skipFailedRequests,
      skipSuccessfulRequests,
      wasSuccessful: () => config.requestWasSuccessful(response.statusCode, request as Req, reply),
      refund: () => giveBack(limiter, result, this.#report, defer),
      report: (error) => this.#report(error, { operation: 'refund', key: result.key }),
      defer,
    })
  }

  /**
   * The adapter saw the handler end the response (Fastify: the reply was sent): the slot is free once the
   * response finishes or the connection closes, at once if the client already left.
   */
  handlerEnded(decision: HttpDecision): void {
    decision.hold?.ended()
  }

  /** The adapter saw the handler's work end (Koa: `await next()` returned): the slot is free now. */
  handlerDone(decision: HttpDecision): void {
    decision.hold?.done()
  }
}
