import { fixedWindow } from '../algorithms/index.js'
import type { Rule } from '../algorithms/types.js'
import { ConcurrencyLimiter, type ConcurrencyResult } from '../limiter/concurrency.js'
import { RateLimiter } from '../limiter/limiter.js'
import { type Identity, namespaceOf } from '../limiter/namespaces.js'
import { type FailureContext, LIMITER_DEFAULTS, parseRules } from '../limiter/options.js'
import { enforcedView, type RateLimitResult, SettleableResult } from '../result.js'
import type { Awaitable, ConcurrencyStore } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { invalid, RateLimitError } from '../support/errors.js'
import { guardedReporter, throttledErrorLog } from '../support/report.js'
import { emitWarning } from '../support/runtime.js'
import { renderBody } from './body.js'
import {
  addConcurrencyHeaders,
  type HeaderOptions,
  partitionKey,
  rateLimitHeaders,
  toSeconds,
} from './headers.js'
import { ipKey } from './keys.js'
import {
  type HttpConfig,
  type HttpRateLimitOptions,
  type ResolvedRules,
  resolveHttpOptions,
} from './options.js'

/** What an adapter tells the engine about its framework. */
export interface FrameworkBinding<Req> {
  /** Framework name, for messages. */
  name: string
  /** The client address as the framework sees it (after its trust-proxy rules). */
  clientIp(request: Req): string | undefined
  /**
   * Whether the request carries `X-Forwarded-For` although the framework does not trust proxies; `undefined`
   * when it carries none. The engine asks until the first request that carries one, then never again.
   */
  untrustedForwardedFor(request: Req): boolean | undefined
  /** How to enable trust-proxy in this framework, for the warning. */
  trustProxyHint: string
  /**
   * Whether the framework trusts every proxy hop (any client can then choose its key with X-Forwarded-For):
   * Express `trust proxy` true, Koa `proxy` without `maxIpsCount`, Fastify `trustProxy: true`. Asked on a
   * middleware's first request only.
   */
  permissiveTrustProxy?(request: Req): boolean
  /** How to trust only your own proxies, for the warning. */
  permissiveTrustProxyHint?: string
  /** The route pattern of the request (`'/users/:id'`) where the framework knows it, for observer events. */
  route?(request: Req): string | undefined
  /** Option names the adapter adds to the shared ones, e.g. `handler`. */
  options?: readonly string[]
  /**
   * Calls `listener` once when the client of `request` disconnects (at once when it already has), and returns
   * how to stop listening: a request waiting for its slot (`delay`) then gives the slot back. Adapters on Node
   * listen to the socket's `close` (`socketClosed`); without it, a waiting request keeps its slot.
   */
  onClose?(request: Req, listener: () => void): () => void
  /**
   * Sets headers on the response `target` the adapter passed to `followSettle` (its response, context or reply),
   * unless they were sent already: after `settle`, the RateLimit headers follow the settled result.
   */
  writeHeaders?(target: unknown, headers: Record<string, string>): void
}

/** Where an engine sits, from its adapter. */
export interface EngineScope {
  /** What scopes its counters besides the rules, e.g. `'GET /login'` for a Fastify route limiter. */
  scope?: string
  /** Names the options object in messages. @default 'rateLimit()' */
  where?: string
  /** The superseded warning's advice for two engines meant to serve (see `Identity.sharing`). */
  sharing?: string
}

/**
 * The part of a response the engine reads to decide a refund: Node's `ServerResponse` fits, without core's
 * public types depending on Node's.
 */
export interface TrackedResponse {
  readonly statusCode: number
  /** True once the whole response was handed to the operating system. */
  readonly writableFinished: boolean
  /** True once the application called `end()`: its handler ended the response, sent or not. */
  readonly writableEnded?: boolean
  /** Whether the connection is gone already (a closed response emits no more events). */
  readonly destroyed?: boolean
  once(event: 'finish' | 'close', listener: () => void): unknown
}

/** A decision in HTTP terms: what to send. Plain data; `body` and `track` are methods of the engine. */
export interface HttpDecision {
  result: RateLimitResult
  /** Headers to set on the response, allowed or not. */
  headers: Record<string, string>
  /** The status of a denial (429, or 503 when the failure policy denied, or `penalty.statusCode` while blocked). */
  statusCode: number
  /** @internal The limiter that decided (the one to refund through); none for a deny-listed request. */
  limiter: RateLimiter | undefined
  /**
   * The in-flight slot this request holds (option `concurrency`), released by `track`. Adapters read whether
   * there is one (not marked internal: their declarations are built against core's).
   */
  slot?: ConcurrencyResult
  /** @internal When that slot is given back, armed by `track`. */
  hold?: SlotHold
}

/**
 * When an admitted request's in-flight slot is given back: once the handler's work is done, never merely
 * because the client left (a concurrency limit bounds server work). The response finishing proves the
 * handler ended it; a closed connection frees the slot only once the handler ended the response too, or at
 * once with `releaseOnClose` (SSE, long polls). What the adapter knows of its framework comes in through
 * `ended` and `done`; a slot whose handler never ends is freed by its lease.
 */
class SlotHold {
  readonly #slot: ConcurrencyResult
  readonly #releaseOnClose: boolean
  readonly #defer: Defer | undefined
  #released = false
  #ended = false
  #closed = false

  constructor(slot: ConcurrencyResult, releaseOnClose: boolean, defer: Defer | undefined) {
    this.#slot = slot
    this.#releaseOnClose = releaseOnClose
    this.#defer = defer
  }

  release(): void {
    if (this.#released) return
    this.#released = true
    const work = this.#slot.release()
    this.#defer?.(work)
  }

  /** The connection closed (after the response finished, or with the client gone before). */
  closed(): void {
    this.#closed = true
    if (this.#ended || this.#releaseOnClose) this.release()
  }

  /**
   * The handler ended the response (Node's `end()`, Fastify's reply sent): the slot is free once the response
   * finishes or the connection closes, at once when it closed already.
   */
  ended(): void {
    this.#ended = true
    if (this.#closed) this.release()
  }

  /** The handler's work is done (Koa: `await next()` returned): free now, unless it is held until the close. */
  done(): void {
    if (!this.#releaseOnClose) this.release()
  }
}

/**
 * Hands the engine's work after the response (a refund, a slot's release) to the runtime, e.g. a Worker's
 * `executionCtx.waitUntil`, which would otherwise stop it once the response is sent. The promise never rejects.
 */
export type Defer = (work: Promise<unknown>) => void

type Endable = TrackedResponse & { end?: (...args: unknown[]) => unknown }

/** The part of a Node socket `socketClosed` uses (core's types do not depend on Node's). */
export interface ClosableSocket {
  readonly destroyed?: boolean
  once(event: 'close', listener: () => void): unknown
  removeListener(event: 'close', listener: () => void): unknown
}

/**
 * `FrameworkBinding.onClose` for a Node socket: `listener` runs once when it closes (at once, on a microtask, when
 * it is closed already); the answer stops listening.
 */
export function socketClosed(socket: ClosableSocket | undefined, listener: () => void): () => void {
  if (socket === undefined) return () => {}
  if (socket.destroyed === true) {
    queueMicrotask(listener)
    return () => {}
  }
  socket.once('close', listener)
  return () => {
    socket.removeListener('close', listener)
  }
}

const MAX_DYNAMIC_LIMITS = 1_000
/** The rule a deny-listed result names when no rule set was resolved yet. */
const DENIED_RULE: Rule = fixedWindow({ limit: 1, window: '1m', name: 'denied' })
/** Frameworks already warned about a permissive trust-proxy setting: once per process each. */
const warnedPermissive = new WeakSet<object>()

/**
 * The framework-neutral middleware engine: options are resolved once, here (http/options.ts); adapters read
 * the request, call `decide`, and write what it returns.
 */
export class HttpRateLimiter<Req> {
  readonly #config: HttpConfig<Req>
  readonly #binding: FrameworkBinding<Req>
  readonly #identity: Identity
  readonly #limiters = new Map<number, RateLimiter>()
  /** Limiters of a `rules` function: by the object it returned, then by rule-set signature (bounded). */
  readonly #resolved = new WeakMap<object, { limiter: RateLimiter; cost: number | undefined }>()
  readonly #bySignature = new Map<string, RateLimiter>()
  readonly #fixed: RateLimiter | undefined
  /** The first limiter: undefined for a `rules` function until its first request. */
  #first: RateLimiter | undefined
  readonly #reportError: (error: unknown, context: FailureContext) => void
  readonly #wantsRoute: boolean
  readonly #concurrency: ConcurrencyLimiter | undefined
  /** The store this middleware made (no `store` option), which `close` closes. */
  readonly #ownStore: unknown
  readonly #ipKeyOptions: { ipv6Subnet: number | false | undefined }
  /** The options of each `limit` call when `cost` is a number and no observer wants the route: made once. */
  readonly #limitOptions: { cost: number | undefined }
  /** The header options of a decision without a partition key: made once. */
  readonly #headerOptions: HeaderOptions
  /** Requests waiting for their slots (`delay`): in all, and per key. */
  #waitingCount = 0
  readonly #waitingPerKey = new Map<string, number>()
  /** Whether the proxy settings were judged: on the first request, and on the first with X-Forwarded-For. */
  #checkedPermissive = false
  #checkedForwardedFor = false

  constructor(
    options: HttpRateLimitOptions<Req> = {},
    binding: FrameworkBinding<Req>,
    scope: EngineScope = {},
  ) {
    const config = resolveHttpOptions(options, binding.options, scope.where)
    this.#config = config
    this.#ownStore = options.store === undefined ? config.limiter.store : undefined
    this.#ipKeyOptions = { ipv6Subnet: config.ipv6Subnet }
    this.#limitOptions = { cost: typeof config.cost === 'number' ? config.cost : undefined }
    this.#headerOptions = { format: config.headers, legacy: config.legacyHeaders }
    this.#binding = binding
    this.#identity = {
      scope: scope.scope,
      owner: this,
      dynamicLimit: typeof config.limit === 'function',
      sharing: scope.sharing,
    }
    this.#wantsRoute = config.limiter.observer?.onDecision !== undefined && binding.route !== undefined
    this.#reportError = guardedReporter(config.limiter.onError ?? throttledErrorLog())
    if (config.resolveRules !== undefined) {
      this.#fixed = undefined
      this.#first = undefined
    } else if (config.rules !== undefined) {
      this.#fixed = new RateLimiter({ ...config.limiter, rules: config.rules }, this.#identity)
      this.#first = this.#fixed
    } else {
      const { limit } = config
      // Built now even for a function limit, so that a bad `window` or a shared namespace fails at construction.
      this.#first = this.#limiterFor(typeof limit === 'number' ? limit : 1)
      this.#fixed = typeof limit === 'number' ? this.#first : undefined
    }
    const { concurrency } = config
    if (concurrency !== undefined) {
      const { onError } = config.limiter
      this.#concurrency = new ConcurrencyLimiter({
        limit: concurrency.limit,
        lease: concurrency.lease,
        store: config.limiter.store as unknown as ConcurrencyStore,
        // The slots live beside this middleware's counters: each route limiter and namespace has its own (with a
        // `rules` function, one set per middleware under its prefix, group and scope).
        prefix: `${this.#first?.namespace ?? namespaceOf(config.limiter.prefix ?? LIMITER_DEFAULTS.prefix, [], config.limiter.group, this.#identity)}cc`,
        timeout: config.limiter.timeout,
        onStoreError: config.limiter.onStoreError,
        onError:
          onError && ((error, context) => onError(error, { operation: context.operation, key: context.key })),
      })
    }
    // `delay` needs rules and a store that reserve: refused now for the rules known now (a `rules` or `limit`
    // function's are checked when they are first resolved).
    if (config.delay !== undefined) this.#first?.checkReservations('delay')
    const { cost } = config
    if (typeof cost === 'number' && this.#fixed && cost > this.#fixed.maxCost) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
        `\`cost\` ${cost} exceeds the limit (${this.#fixed.maxCost}): no request could ever pass. Lower the cost or raise the limit.`,
        { option: 'cost' },
      )
    }
  }

  /**
   * Where the counters of this middleware live in its store (see docs/counters.md). With a `rules` function,
   * each rule set has its own: this is the first one resolved ('' before any request).
   */
  get namespace(): string {
    return this.#first?.namespace ?? ''
  }

  /**
   * Gives up this middleware's claims on its namespaces (e.g. when a Fastify instance closes). A middleware built
   * later on the same store and namespace takes them over anyway; this one, if it still decides, then warns once
   * (`RATEWINDOW_SUPERSEDED_LIMITER`, docs/counters.md).
   */
  release(): void {
    for (const limiter of this.#all()) limiter.release()
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

  #all(): Set<RateLimiter> {
    const all = new Set<RateLimiter>([...this.#limiters.values(), ...this.#bySignature.values()])
    if (this.#first !== undefined) all.add(this.#first)
    return all
  }

  /**
   * Forgets `key` in every counter of this middleware (each rule set it has used), e.g. after a successful
   * login. Store errors reject: the caller decides.
   */
  async resetKey(key: string): Promise<void> {
    await Promise.all([...this.#all()].map((limiter) => limiter.reset(key)))
  }

  /** Forgets the key of `request` (as `key`, or the client IP, would give it); rejects as `resetKey` does. */
  async reset(request: Req): Promise<void> {
    await this.resetKey(await this.#keyOf(request))
  }

  async #keyOf(request: Req): Promise<string> {
    const config = this.#config
    return config.key
      ? await config.key(request)
      : ipKey(this.#binding.clientIp(request) ?? '', this.#ipKeyOptions)
  }

  /**
   * Decides for one request; undefined when `skip` says so. Rejects when a user callback (`skip`, `key`,
   * `cost`, `limit`, `rules`) throws or returns a bad value: adapters pass that to the framework's error handling.
   */
  decide(request: Req): Promise<HttpDecision | undefined> {
    return Promise.resolve(this.decideNow(request))
  }

  /**
   * `decide` for adapters: the decision itself when nothing on its way was asynchronous (the memory store,
   * synchronous callbacks), else a promise of it. Never throws: a failing callback gives a rejected promise.
   */
  decideNow(request: Req): HttpDecision | undefined | Promise<HttpDecision | undefined> {
    try {
      // Deny wins over skip (and over the allow list): a `denyList` function is asked first.
      const { denyWhen, enabled } = this.#config
      if (!enabled) return undefined
      if (denyWhen === undefined) return this.#skipOrDecide(request)
      const denied = denyWhen(request)
      if (isThenable(denied))
        return Promise.resolve(denied).then((yes) =>
          yes ? this.#deniedRequest(request) : this.#skipOrDecide(request),
        )
      return denied ? this.#deniedRequest(request) : this.#skipOrDecide(request)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  #skipOrDecide(request: Req): Awaitable<HttpDecision | undefined> {
    const { skip } = this.#config
    if (skip === undefined) return this.#decideUnskipped(request)
    const skipped = skip(request)
    if (isThenable(skipped))
      return Promise.resolve(skipped).then((yes) =>
        yes ? this.#skippedUnlessDenied(request) : this.#decideUnskipped(request),
      )
    return skipped ? this.#skippedUnlessDenied(request) : this.#decideUnskipped(request)
  }

  /** A skipped request the deny list names is still refused (deny wins over skip); else undefined. */
  #skippedUnlessDenied(request: Req): Awaitable<HttpDecision | undefined> {
    const config = this.#config
    const { denyList } = config
    if (denyList === undefined || denyList.empty) return undefined
    const ip = this.#binding.clientIp(request)
    if (denyList.hasIp(ip)) return this.#denied(ip ?? '')
    // The key is computed for a skipped request only when the deny list holds keys.
    if (!denyList.keyed) return undefined
    const key = config.key ? config.key(request) : ipKey(ip ?? '', this.#ipKeyOptions)
    const check = (k: string) => (denyList.hasKey(k) ? this.#denied(k) : undefined)
    return isThenable(key) ? Promise.resolve(key).then(check) : check(key)
  }

  #deniedRequest(request: Req): HttpDecision {
    return this.#denied(this.#binding.clientIp(request) ?? '')
  }

  #decideUnskipped(request: Req): Awaitable<HttpDecision | undefined> {
    const config = this.#config
    this.#warnOnProxySettings(request)
    const { allowList, denyList } = config
    let allowed = false
    if (allowList !== undefined || denyList !== undefined) {
      const ip = this.#binding.clientIp(request)
      if (denyList?.hasIp(ip)) return this.#denied(ip ?? '')
      allowed = allowList?.hasIp(ip) === true
    }
    const key = config.key
      ? config.key(request)
      : ipKey(this.#binding.clientIp(request) ?? '', this.#ipKeyOptions)
    if (isThenable(key)) return Promise.resolve(key).then((k) => this.#decideFor(request, k, allowed))
    return this.#decideFor(request, key, allowed)
  }

  #decideFor(request: Req, key: string, allowedIp: boolean): Awaitable<HttpDecision | undefined> {
    const { allowList, denyList, cost } = this.#config
    if (denyList?.hasKey(key)) return this.#denied(key)
    if (allowedIp || allowList?.hasKey(key)) return undefined
    const limiter = this.#fixed
    if (limiter === undefined || typeof cost === 'function') return this.#decideDynamic(request, key)
    return this.#limit(limiter, key, cost, request)
  }

  /** A `cost`, `limit` or `rules` function: their answers may be promises. */
  async #decideDynamic(request: Req, key: string): Promise<HttpDecision> {
    const config = this.#config
    let cost = typeof config.cost === 'function' ? await config.cost(request) : config.cost
    let limiter = this.#fixed
    if (limiter === undefined) {
      if (config.resolveRules !== undefined) {
        const resolved = this.#resolve(await config.resolveRules(request))
        limiter = resolved.limiter
        if (resolved.cost !== undefined) cost = resolved.cost
      } else limiter = this.#limiterFor(await (config.limit as (request: Req) => Awaitable<number>)(request))
    }
    return this.#limit(limiter, key, cost, request)
  }

  #limit(limiter: RateLimiter, key: string, cost: number | undefined, request: Req): Awaitable<HttpDecision> {
    const options = this.#wantsRoute
      ? { cost, route: this.#routeOf(request) }
      : cost === this.#limitOptions.cost
        ? this.#limitOptions
        : { cost }
    const { delay } = this.#config
    if (delay === undefined) {
      const result = limiter.limitNow(key, options)
      if (isThenable(result)) return result.then((each) => this.#admit(limiter, key, each))
      return this.#admit(limiter, key, result)
    }
    // A place among the waiting requests is taken before the store call (so that concurrent decisions cannot all
    // pass the bounds), and given up when the answer is not a wait. Without a place, nothing is reserved: a
    // request over the limit is refused as without `delay`.
    const claimed = this.#claimWait(key)
    let result: Awaitable<RateLimitResult>
    try {
      result = limiter.limitNow(key, options, claimed ? delay.maxMs : undefined)
    } catch (error) {
      if (claimed) this.#endWait(key)
      throw error
    }
    if (isThenable(result))
      return result.then(
        (each) => this.#admit(limiter, key, each, claimed ? request : undefined),
        (error: unknown) => {
          if (claimed) this.#endWait(key)
          throw error
        },
      )
    return this.#admit(limiter, key, result, claimed ? request : undefined)
  }

  /**
   * The decision for the limiter's result; with a concurrency limit, its in-flight slot. `waiting`: the request,
   * when it holds a place among the waiting requests (`delay`): a result with a reserved slot then waits for it.
   */
  #admit(limiter: RateLimiter, key: string, result: RateLimitResult, waiting?: Req): Awaitable<HttpDecision> {
    if (waiting !== undefined) {
      // Shadow mode reports the slot but never waits (docs/waiting.md).
      if (result.delay !== undefined && result.shadow !== true)
        return this.#waitFor(limiter, key, result, waiting)
      this.#endWait(key)
    }
    const decision = this.#toDecision(limiter, result)
    if (this.#concurrency === undefined || !result.allowed) return decision
    return Promise.resolve(this.#concurrency.acquire(key)).then((slot) => this.#withSlot(decision, slot))
  }

  /** Takes a place among the waiting requests of `key`; false when a bound is reached. */
  #claimWait(key: string): boolean {
    const { maxWaiting, maxPerKey } = this.#config.delay!
    const ofKey = this.#waitingPerKey.get(key) ?? 0
    if (this.#waitingCount >= maxWaiting || ofKey >= maxPerKey) return false
    this.#waitingCount++
    this.#waitingPerKey.set(key, ofKey + 1)
    return true
  }

  #endWait(key: string): void {
    this.#waitingCount--
    const ofKey = this.#waitingPerKey.get(key)! - 1
    if (ofKey === 0) this.#waitingPerKey.delete(key)
    else this.#waitingPerKey.set(key, ofKey)
  }

  /**
   * A request whose slot was reserved: it takes its in-flight slot first (a waiting request counts against
   * `concurrency`), then waits for its slot under the limiter's one timer. A client that disconnects meanwhile
   * gives both back; its request is answered as refused (to nobody).
   */
  async #waitFor(
    limiter: RateLimiter,
    key: string,
    result: RateLimitResult,
    request: Req,
  ): Promise<HttpDecision> {
    try {
      let decision = this.#toDecision(limiter, result)
      if (this.#concurrency !== undefined) {
        decision = this.#withSlot(decision, await this.#concurrency.acquire(key))
        if (!decision.result.allowed) return decision
      }
      const gone = new AbortController()
      const stop = this.#binding.onClose?.(request, () => gone.abort())
      try {
        await limiter.waitForSlot(result, gone.signal)
      } catch {
        limiter.refund(result).catch((error: unknown) => this.#report(error, { operation: 'refund', key }))
        // A release never rejects (failures go to onError).
        void decision.slot?.release()
        return {
          result: { ...result, allowed: false, retryAfter: result.delay! },
          headers: {},
          statusCode: this.#config.statusCode,
          limiter,
        }
      } finally {
        stop?.()
      }
      return decision
    } finally {
      this.#endWait(key)
    }
  }

  /** Adds the in-flight slot to an admitted decision, or turns it into a denial when no slot is free. */
  #withSlot(decision: HttpDecision, slot: ConcurrencyResult): HttpDecision {
    const config = this.#config
    const format = config.headers
    const pk =
      config.partitionKeySecret && (format === 'draft-8' || format === 'draft-11')
        ? partitionKey(decision.result.key, config.partitionKeySecret)
        : undefined
    const info = { name: config.concurrency!.name, limit: slot.limit, remaining: slot.remaining }
    if (slot.allowed) {
      if (slot.source === 'store') addConcurrencyHeaders(decision.headers, format, info, { partitionKey: pk })
      return { ...decision, slot }
    }
    // No slot: the request is not served, so its rate limit charge is given back.
    decision.limiter
      ?.refund(decision.result)
      .catch((error: unknown) => this.#report(error, { operation: 'refund', key: decision.result.key }))
    const retryAfter = 1_000
    const result: RateLimitResult = { ...decision.result, allowed: false, remaining: 0, retryAfter }
    delete result.settle
    const headers: Record<string, string> =
      slot.source === 'policy'
        ? { 'Retry-After': String(toSeconds(retryAfter)) }
        : addConcurrencyHeaders(
            format === 'draft-8' || format === 'draft-11'
              ? {
                  'RateLimit-Policy': decision.headers['RateLimit-Policy'] ?? '',
                  'Retry-After': String(toSeconds(retryAfter)),
                }
              : { 'Retry-After': String(toSeconds(retryAfter)) },
            format,
            { ...info, remaining: 0 },
            { partitionKey: pk },
          )
    return {
      result,
      headers,
      statusCode: slot.source === 'policy' ? 503 : config.statusCode,
      limiter: decision.limiter,
    }
  }

  /** The framework's route of the request; a binding that throws gives none (observers only). */
  #routeOf(request: Req): string | undefined {
    try {
      return this.#binding.route!(request)
    } catch {
      return undefined
    }
  }

  /** A deny-listed request: refused before any store call, without RateLimit headers. */
  #denied(key: string): HttpDecision {
    const limiter = this.#first
    const rule = limiter?.rules[0] ?? DENIED_RULE
    const result: RateLimitResult = {
      allowed: false,
      limit: rule.limit,
      remaining: 0,
      reset: 0,
      retryAfter: 0,
      key,
      cost: 0,
      at: Date.now(),
      rule,
      rules: [],
      source: 'deny-list',
    }
    return { result, headers: {}, statusCode: this.#config.denyStatusCode, limiter }
  }

  #toDecision(limiter: RateLimiter, result: RateLimitResult): HttpDecision {
    const config = this.#config
    // Admitted: `result.settle` reports the actual cost (reserve-then-settle).
    if (result.allowed && result.source !== 'policy') result = new SettleableResult(limiter, result)
    const policy = result.source === 'policy'
    // The failure policy and a shed decision know no quota: Retry-After only, no RateLimit headers.
    const quotaUnknown = policy || result.source === 'shed'
    const format = config.headers
    // Shadow mode: headers describe the enforcing rules only; a shadow limiter sends none (docs/rollout.md).
    const shown = limiter.shadow ? undefined : enforcedView(result)
    if (shown === undefined) return { result, headers: {}, statusCode: config.statusCode, limiter }
    const pk =
      config.partitionKeySecret && (format === 'draft-8' || format === 'draft-11')
        ? partitionKey(result.key, config.partitionKeySecret)
        : undefined
    const headers = quotaUnknown
      ? result.allowed
        ? {}
        : { 'Retry-After': String(toSeconds(result.retryAfter)) }
      : rateLimitHeaders(
          shown,
          pk === undefined ? this.#headerOptions : { format, legacy: config.legacyHeaders, partitionKey: pk },
        )
    const statusCode = policy
      ? 503
      : result.blocked !== undefined
        ? (limiter.penalty?.statusCode ?? config.statusCode)
        : config.statusCode
    return { result, headers, statusCode, limiter }
  }

  /**
   * After `req.rateLimit.settle(n)` changed the charge, the RateLimit headers follow the settled result, as long
   * as they have not been sent (the binding's `writeHeaders` on `target`). Adapters call it for an admitted
   * decision after setting its headers; it costs two field writes, no closure.
   */
  followSettle(decision: HttpDecision, target: unknown): void {
    const { result, limiter } = decision
    if (result instanceof SettleableResult && this.#binding.writeHeaders !== undefined && !limiter?.shadow)
      result.follow(this, target, decision.slot)
  }

  /** @internal The headers of a settled result, written to `target` (see `followSettle`). */
  rewrite(result: RateLimitResult, target: unknown, slot: ConcurrencyResult | undefined): void {
    const shown = enforcedView(result)
    if (shown === undefined) return
    const config = this.#config
    const format = config.headers
    const pk =
      config.partitionKeySecret && (format === 'draft-8' || format === 'draft-11')
        ? partitionKey(result.key, config.partitionKeySecret)
        : undefined
    const headers = rateLimitHeaders(
      shown,
      pk === undefined ? this.#headerOptions : { format, legacy: config.legacyHeaders, partitionKey: pk },
    )
    if (slot?.allowed && slot.source === 'store') {
      const info = { name: config.concurrency!.name, limit: slot.limit, remaining: slot.remaining }
      addConcurrencyHeaders(headers, format, info, { partitionKey: pk })
    }
    this.#binding.writeHeaders!(target, headers)
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
    return this.#concurrency !== undefined
  }

  /**
   * Arms, on the raw response, the refund of `skipFailedRequests`/`skipSuccessfulRequests` and the release of
   * the request's in-flight slot (`SlotHold`: when the handler's work is done, not when the client leaves).
   * Only a response that was completely sent is judged for a refund: a client that disconnects first gets
   * nothing back, since the handler may have run for it (docs/counters.md).
   */
  track(response: TrackedResponse, decision: HttpDecision, defer?: Defer): void {
    const { limiter, result, slot } = decision
    if (slot !== undefined) this.#hold(response, decision, slot, defer)
    const { skipFailedRequests, skipSuccessfulRequests } = this.#config
    if (!result.allowed || limiter === undefined || (!skipFailedRequests && !skipSuccessfulRequests)) return
    let settled = false
    const settle = () => {
      if (settled) return
      settled = true
      if (!response.writableFinished) return
      let success: boolean
      try {
        success = this.#config.requestWasSuccessful(response.statusCode) === true
      } catch (error) {
        // NOTE: a throwing callback must not crash the server from an event listener; the request counts.
        this.#report(error, { operation: 'refund', key: result.key })
        return
      }
      if (success ? skipSuccessfulRequests : skipFailedRequests) {
        const work = limiter
          .refund(result)
          .catch((error: unknown) => this.#report(error, { operation: 'refund', key: result.key }))
        defer?.(work)
      }
    }
    response.once('finish', settle)
    response.once('close', settle)
  }

  /**
   * Holds the slot until the response finishes, or, when the connection closes first, until the handler ends
   * the response: on a Node response, its `end()` (wrapped on that response once the client has left).
   */
  #hold(
    response: TrackedResponse,
    decision: HttpDecision,
    slot: ConcurrencyResult,
    defer: Defer | undefined,
  ): void {
    const releaseOnClose = this.#config.concurrency?.releaseOnClose === true
    const hold = new SlotHold(slot, releaseOnClose, defer)
    decision.hold = hold
    if (response.writableFinished) {
      hold.release()
      return
    }
    const onClose = () => {
      if (response.writableEnded === true) hold.ended()
      else if (!releaseOnClose) {
        const endable = response as Endable
        const end = endable.end
        if (typeof end === 'function') {
          endable.end = function endAfterClose(this: unknown, ...args: unknown[]) {
            try {
              return end.apply(this, args)
            } finally {
              hold.ended()
            }
          }
        }
      }
      hold.closed()
    }
    response.once('finish', () => hold.release())
    if (response.destroyed === true) onClose()
    else response.once('close', onClose)
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

  /** Reports to `onError`, which cannot throw or reject into the request (report.ts guardedReporter). */
  #report(error: unknown, context: FailureContext): void {
    this.#reportError(error, context)
  }

  /**
   * The limiter of what a `rules` function returned: found by the object itself (a plan built once costs one
   * lookup), else validated and found or made by its rule-set signature, so that equal rule sets share one
   * limiter and different ones never share counters. Throws a `RateLimitError` for a bad value.
   */
  #resolve(value: ResolvedRules): { limiter: RateLimiter; cost: number | undefined } {
    const known = typeof value === 'object' && value !== null ? this.#resolved.get(value) : undefined
    if (known !== undefined) return known
    const withCost = typeof value === 'object' && value !== null && !Array.isArray(value) && 'rules' in value
    const rules = parseRules(withCost ? (value as { rules: unknown }).rules : value)
    let cost: number | undefined
    if (withCost) {
      cost = (value as { cost?: number }).cost
      if (cost !== undefined && (!Number.isSafeInteger(cost) || cost < 0)) {
        throw invalid(
          'ERR_RATEWINDOW_INVALID_COST',
          'cost',
          cost,
          'a whole number >= 0 (returned by `rules`)',
        )
      }
    }
    const signature = rules.map((rule) => `${rule.id}x${rule.limit}`).join('+')
    let limiter = this.#bySignature.get(signature)
    if (limiter === undefined) {
      if (this.#bySignature.size >= MAX_DYNAMIC_LIMITS) {
        const [oldest, dropped] = this.#bySignature.entries().next().value!
        this.#bySignature.delete(oldest)
        if (dropped !== this.#first) dropped.release()
      }
      limiter = new RateLimiter({ ...this.#config.limiter, rules }, this.#identity)
      if (this.#config.delay !== undefined) limiter.checkReservations('delay')
      this.#bySignature.set(signature, limiter)
      this.#first ??= limiter
    }
    const entry = { limiter, cost }
    if (typeof value === 'object' && value !== null) this.#resolved.set(value, entry)
    return entry
  }

  #limiterFor(limit: number): RateLimiter {
    let limiter = this.#limiters.get(limit)
    if (limiter === undefined) {
      if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) {
        throw invalid(
          'ERR_RATEWINDOW_INVALID_LIMIT',
          'limit',
          limit,
          'a positive whole number (returned by the `limit` function)',
        )
      }
      if (this.#limiters.size >= MAX_DYNAMIC_LIMITS)
        this.#limiters.delete(this.#limiters.keys().next().value!)
      const rule: Rule = this.#config.makeRule!(limit)
      limiter = new RateLimiter({ ...this.#config.limiter, rules: rule }, this.#identity)
      if (this.#config.delay !== undefined) limiter.checkReservations('delay')
      this.#limiters.set(limit, limiter)
    }
    return limiter
  }

  /**
   * Warns once about a trust-proxy setting that makes keys wrong. The settings do not change while the app
   * runs, so this costs nothing after the first request with X-Forwarded-For.
   */
  #warnOnProxySettings(request: Req): void {
    const binding = this.#binding
    if (!this.#checkedPermissive) {
      this.#checkedPermissive = true
      if (!warnedPermissive.has(binding) && binding.permissiveTrustProxy?.(request)) {
        warnedPermissive.add(binding)
        emitWarning(
          `${binding.name} trusts every proxy hop, so any client can choose its rate limit key by sending ` +
            `X-Forwarded-For. ${binding.permissiveTrustProxyHint ?? 'Trust only your own proxies.'}`,
          'RATEWINDOW_PERMISSIVE_TRUST_PROXY',
        )
      }
    }
    if (this.#checkedForwardedFor) return
    const untrusted = binding.untrustedForwardedFor(request)
    if (untrusted === undefined) return
    this.#checkedForwardedFor = true
    if (!untrusted) return
    emitWarning(
      `A request carried X-Forwarded-For but ${binding.name} does not trust proxies, so every client behind ` +
        `your proxy shares the proxy's rate limit. If a proxy you control sets it, ${binding.trustProxyHint}.`,
      'RATEWINDOW_UNTRUSTED_PROXY',
    )
  }
}
