/**
 * `slowDown()`, the part every adapter shares: express-slow-down 2's model on ratewindow's stores. Every request
 * of a client is counted in a fixed window of `windowMs`; those after the first `delayAfter` wait `delayMs`
 * (a number, or a function of the count), at most `maxDelayMs`, then go on. Nothing is ever refused.
 *
 * The counting is a `HttpRateLimiter` whose one rule admits far more than any client sends (so it only counts),
 * on the adapter's own key and trust-proxy rules; the waiting is one shared timer (delay-queue.ts).
 */

import { fixedWindow } from '../algorithms/index.js'
import { MAX_PRODUCT } from '../algorithms/rule.js'
import type { CircuitBreakerOptions } from '../gateway/circuit-breaker.js'
import type { Defer, FrameworkBinding, TrackedResponse } from '../http/binding.js'
import type { HttpDecision } from '../http/decision.js'
import { HttpRateLimiter } from '../http/engine.js'
import type { FailureContext } from '../limiter/options.js'
import type { DecisionEvent, DecisionOutcome, RateLimitObserver } from '../observe.js'
import type { Awaitable, Store } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import type { Duration } from '../support/duration.js'
import { describeValue, invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { guardedObserver, guardedReporter, throttledErrorLog } from '../support/report.js'
import { type DelayQueue, type DelayTimers, delayQueueOf, PLATFORM_TIMERS } from '../time/delay-queue.js'

/** What a slowed-down request carries (`req.slowDown` in Express): express-slow-down's fields. */
export interface SlowDownInfo {
  /** `delayAfter` for this request: the requests of a window that go at full speed. */
  limit: number
  /** Requests of this client in the current window, this one included. */
  used: number
  /** Requests left before delays start: `max(0, limit - used)`. */
  remaining: number
  /** When the window ends and the count starts again; undefined when the store could not count. */
  resetTime: Date | undefined
  /** The delay imposed on this request, ms (0: none). */
  delay: number
  /** The client's key. */
  key: string
}

/**
 * The options of `slowDown()`: express-slow-down 2's names and meanings. `Args` are the arguments the adapter
 * passes to each callback: Express `(req, res)`, Koa `(ctx)`, Fastify `(request, reply)`, Hono `(c)`.
 */
export interface SlowDownOptions<Args extends unknown[]> {
  /** The window requests are counted in, ms (a fixed window: every client's ends at the same instant). @default 60000 */
  windowMs?: number
  /** Requests of a window that go at full speed; later ones are delayed. A number or a function. @default 1 */
  delayAfter?: number | ((...args: Args) => Awaitable<number>)
  /**
   * The delay of a request after `delayAfter`, ms: a number (the same for each), or a function of `used` (this
   * request's count in the window) and the request. @default (used) => (used - delayAfter) * 1000
   */
  delayMs?: number | ((used: number, ...args: Args) => Awaitable<number>)
  /** The longest delay, ms: keep it under your proxy's timeout. A number or a function. @default Infinity */
  maxDelayMs?: number | ((...args: Args) => Awaitable<number>)
  /** The client's key. @default the client IP (the framework's trust-proxy rules apply), IPv6 masked to `ipv6Subnet` */
  keyGenerator?: (...args: Args) => Awaitable<string>
  /** IPv6 prefix length the default key groups clients by; `false` for full addresses. @default 56 */
  ipv6Subnet?: number | false
  /** Requests for which this returns true are neither counted nor delayed. */
  skip?: (...args: Args) => Awaitable<boolean>
  /**
   * Take back the count of a request whose response was sent and failed (`requestWasSuccessful` false), or
   * whose client left while it was being delayed (the handler never ran). @default false
   */
  skipFailedRequests?: boolean
  /** Take back the count of a request whose response was sent and succeeded. @default false */
  skipSuccessfulRequests?: boolean
  /** What counts as success for the two options above. @default the response status is below 400 */
  requestWasSuccessful?: (...args: Args) => Awaitable<boolean>
  /**
   * Where the counts live: `MemoryStore` (this process), `RedisStore` or `SyncedStore` (shared by every
   * process). Counts are kept apart from every `rateLimit()` on the same store. @default new MemoryStore()
   */
  store?: Store
  /** Prepended to the counters' keys in the store. @default 'rw' */
  prefix?: string
  /** Longest wait for the store; past it the request goes on without delay. @default '250ms' */
  timeout?: Duration
  /** A store that counts while the main one fails, e.g. `new MemoryStore()`. */
  fallback?: Store
  /**
   * Receives every store failure; the request then goes on without delay (slowDown never refuses).
   * @default a throttled console.error
   */
  onError?: (error: unknown, context: FailureContext) => unknown
  /** Stop waiting on a store that keeps failing (see RateLimiterOptions); `false` to disable. */
  circuitBreaker?: CircuitBreakerOptions | false
  /** This middleware's name in observer events and metrics. @default its namespace in the store */
  name?: string
  /** Decisions (outcome `'delayed'` when delayed, else `'allowed'`, `'failed-open'`), store calls, breakers. */
  observer?: RateLimitObserver
  /**
   * express-slow-down's switch for its startup checks (`false`, or `{ delayMs: false }`…): accepted so that a
   * configuration moves unchanged; ratewindow checks every option at construction whatever it says.
   */
  validate?: boolean | Readonly<Record<string, boolean>>
  /**
   * express-rate-limit's name: accepted so that a configuration moves unchanged. slowDown always lets a request
   * through without delay when the store fails (and reports it to `onError`).
   */
  passOnStoreError?: boolean
  /**
   * The timers delays run on: `now()`, `setTimeout`, `clearTimeout`. For tests that drive time; the platform's
   * by default (looked up at each call, so that fake timers drive them too). Every middleware on the same timers
   * shares one timer.
   */
  timers?: DelayTimers
}

/** The defaults of `slowDown()`, in one place. */
export const SLOW_DOWN_DEFAULTS = {
  windowMs: 60_000,
  delayAfter: 1,
  maxDelayMs: Number.POSITIVE_INFINITY,
  skipFailedRequests: false,
  skipSuccessfulRequests: false,
} as const

const SLOW_DOWN_NAMES = namesOf<SlowDownOptions<unknown[]>>({
  windowMs: true,
  delayAfter: true,
  delayMs: true,
  maxDelayMs: true,
  keyGenerator: true,
  ipv6Subnet: true,
  skip: true,
  skipFailedRequests: true,
  skipSuccessfulRequests: true,
  requestWasSuccessful: true,
  store: true,
  prefix: true,
  timeout: true,
  fallback: true,
  onError: true,
  circuitBreaker: true,
  name: true,
  observer: true,
  validate: true,
  passOnStoreError: true,
  timers: true,
})

/** Names express-slow-down itself refuses, or that mean refusing: each with what to do instead. */
const REFUSED: Readonly<Record<string, string>> = {
  limit:
    'slowDown() never refuses: requests after `delayAfter` are delayed. For a hard limit, add `rateLimit()`.',
  max: 'slowDown() never refuses: requests after `delayAfter` are delayed. For a hard limit, add `rateLimit()`.',
  handler: 'slowDown() never answers a request itself, so it has no `handler`.',
  message: 'slowDown() never answers a request itself, so it has no `message`.',
  statusCode: 'slowDown() never answers a request itself, so it has no `statusCode`.',
  headers:
    'slowDown() sends no RateLimit headers (as express-slow-down); the delay is on the request. For headers, add `rateLimit()`.',
  standardHeaders:
    'slowDown() sends no RateLimit headers (as express-slow-down); the delay is on the request. For headers, add `rateLimit()`.',
  legacyHeaders:
    'slowDown() sends no RateLimit headers (as express-slow-down); the delay is on the request. For headers, add `rateLimit()`.',
  draft_polli_ratelimit_headers:
    'slowDown() sends no RateLimit headers (as express-slow-down); the delay is on the request. For headers, add `rateLimit()`.',
  identifier:
    'slowDown() sends no RateLimit headers, so it has no policy name to give; `name` names it in observer events.',
  onLimitReached:
    'express-slow-down 2 dropped `onLimitReached`, and slowDown() never refuses: a delayed request carries its delay (`req.slowDown.delay` in Express), and an `observer` sees the outcome `delayed`.',
  requestPropertyName:
    "`requestPropertyName` is @ratewindow/express's only: here the info is always at `ctx.state.slowDown` (Koa), `request.slowDown` (Fastify, and the request of a Nest middleware) or `c.get('slowDown')` (Hono).",
  window: "slowDown() takes express-slow-down's `windowMs` (milliseconds).",
}

/** The most requests a window can count: far beyond any client, within the rule's exactness bound. */
const MAX_WINDOW_MS = 2 ** 31 - 1

type Call<Req, Args> = { request: Req; args: Args }

/** What `decide` found for a request: its info (to put on the request) and how long it waits. */
export interface SlowDownDecision {
  info: SlowDownInfo
  /** The counting decision behind it (what `skipFailedRequests` gives back). */
  decision: HttpDecision
}

/**
 * The engine of every adapter's `slowDown()`: validates the options at construction, counts and computes each
 * request's delay (`decide`), then runs it after the delay unless its client leaves first (`proceed`).
 */
export class SlowDownEngine<Req, Args extends unknown[]> {
  readonly #limiter: HttpRateLimiter<Call<Req, Args>>
  readonly #binding: FrameworkBinding<Req>
  readonly #delayAfter: SlowDownOptions<Args>['delayAfter'] & {}
  readonly #delayMs: SlowDownOptions<Args>['delayMs']
  readonly #maxDelayMs: SlowDownOptions<Args>['maxDelayMs'] & {}
  readonly #skipFailed: boolean
  readonly #skipSuccessful: boolean
  readonly #wasSuccessful: ((...args: Args) => Awaitable<boolean>) | undefined
  readonly #queue: DelayQueue
  readonly #onDecision: ((event: DecisionEvent) => void) | undefined
  readonly #report: (error: unknown, context: FailureContext) => void

  constructor(
    options: SlowDownOptions<Args> = {},
    binding: FrameworkBinding<Req>,
    adapterNames: readonly string[] = [],
    where = 'slowDown()',
  ) {
    requireObject(options, 'options', '{ windowMs: 15 * 60 * 1000, delayAfter: 5, delayMs: 500 }')
    for (const name of Object.keys(options)) {
      // The adapter's own options (Express's `requestPropertyName`) are not refused.
      if (adapterNames.includes(name)) continue
      const reason = Object.hasOwn(REFUSED, name) ? REFUSED[name] : undefined
      if (reason !== undefined && (options as Record<string, unknown>)[name] !== undefined) {
        throw new RateLimitError(
          'ERR_RATEWINDOW_UNKNOWN_OPTION',
          `Unknown option \`${name}\` in ${where} options: ${reason}`,
          { option: name },
        )
      }
    }
    const known = [...SLOW_DOWN_NAMES, ...adapterNames, ...Object.keys(REFUSED)]
    rejectUnknownOptions(options, known, where)
    const windowMs = options.windowMs ?? SLOW_DOWN_DEFAULTS.windowMs
    if (
      typeof windowMs !== 'number' ||
      !Number.isSafeInteger(windowMs) ||
      windowMs < 1 ||
      windowMs > MAX_WINDOW_MS
    )
      throw invalid(
        'ERR_RATEWINDOW_INVALID_WINDOW',
        'windowMs',
        windowMs,
        `a whole number of ms from 1 to ${MAX_WINDOW_MS}`,
      )
    this.#delayAfter = numberOrFunction(options.delayAfter, 'delayAfter', SLOW_DOWN_DEFAULTS.delayAfter, true)
    this.#maxDelayMs = numberOrFunction(
      options.maxDelayMs,
      'maxDelayMs',
      SLOW_DOWN_DEFAULTS.maxDelayMs,
      false,
    )
    const { delayMs } = options
    if (delayMs !== undefined && typeof delayMs !== 'function') checkDelay(delayMs, 'delayMs', false)
    this.#delayMs = delayMs
    for (const name of ['keyGenerator', 'skip', 'requestWasSuccessful'] as const) {
      if (options[name] !== undefined && typeof options[name] !== 'function')
        throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, options[name], 'a function')
    }
    for (const name of ['skipFailedRequests', 'skipSuccessfulRequests', 'passOnStoreError'] as const) {
      if (options[name] !== undefined && typeof options[name] !== 'boolean')
        throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, options[name], 'true or false')
    }
    const { validate } = options
    if (
      validate !== undefined &&
      typeof validate !== 'boolean' &&
      (typeof validate !== 'object' || validate === null)
    )
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'validate',
        validate,
        'true, false or an object of checks',
      )
    const timers = options.timers ?? PLATFORM_TIMERS
    if (
      typeof timers !== 'object' ||
      timers === null ||
      !['now', 'setTimeout', 'clearTimeout'].every(
        (name) => typeof (timers as unknown as Record<string, unknown>)[name] === 'function',
      )
    )
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'timers',
        timers,
        'an object with now, setTimeout and clearTimeout',
      )
    this.#queue = delayQueueOf(timers)
    this.#skipFailed = options.skipFailedRequests ?? SLOW_DOWN_DEFAULTS.skipFailedRequests
    this.#skipSuccessful = options.skipSuccessfulRequests ?? SLOW_DOWN_DEFAULTS.skipSuccessfulRequests
    this.#wasSuccessful = options.requestWasSuccessful
    this.#binding = binding
    const { keyGenerator, skip, observer } = options
    if (observer !== undefined) requireObject(observer, 'observer', '{ onDecision(event) {} }')
    this.#onDecision = guardedObserver(observer?.onDecision, 'onDecision')
    this.#report = guardedReporter(options.onError ?? throttledErrorLog())
    // One rule that counts and never refuses: as many requests per window as the rule can count exactly.
    const capacity = Math.min(1_000_000_000, Math.floor(MAX_PRODUCT / windowMs))
    this.#limiter = new HttpRateLimiter<Call<Req, Args>>(
      {
        rules: fixedWindow({ limit: capacity, window: windowMs, name: 'slow-down' }),
        key:
          keyGenerator &&
          ((call) => {
            const key = keyGenerator(...call.args)
            return isThenable(key) ? Promise.resolve(key).then(generatedKey) : generatedKey(key)
          }),
        skip: skip && ((call) => skip(...call.args)),
        ipv6Subnet: options.ipv6Subnet,
        store: options.store,
        prefix: options.prefix,
        timeout: options.timeout,
        fallback: options.fallback,
        onError: options.onError,
        circuitBreaker: options.circuitBreaker,
        name: options.name,
        observer:
          observer === undefined
            ? undefined
            : { onStoreCall: observer.onStoreCall, onBreaker: observer.onBreaker },
        // A store that cannot answer, or sheds, lets the request through without delay.
        onStoreError: 'allow',
        onShed: 'fallback',
        headers: false,
      },
      callBinding(binding),
      // Counts of their own: never the counters of a rateLimit() on the same store and prefix.
      {
        scope: 'slow-down',
        where,
        // slowDown() has no `group`: two of them on one store with one `windowMs` share their counts.
        sharing: `give each ${where} its own \`prefix\` to count apart (${where} on one store with the same \`windowMs\` share their counts).`,
      },
    )
  }

  /** Where the counts live in the store. */
  get namespace(): string {
    return this.#limiter.namespace
  }

  /**
   * Counts the request and computes its delay; undefined when `skip` says so. Rejects (or throws) when a
   * callback throws or returns a bad value: adapters pass that to the framework's error handling.
   */
  decide(request: Req, args: Args): Awaitable<SlowDownDecision | undefined> {
    const decided = this.#limiter.decideNow({ request, args })
    if (decided instanceof Promise) return decided.then((each) => each && this.#delay(request, args, each))
    return decided && this.#delay(request, args, decided)
  }

  #delay(request: Req, args: Args, decision: HttpDecision): Awaitable<SlowDownDecision> {
    const after = this.#delayAfter
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
  ): Awaitable<SlowDownDecision> {
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
    const delayMs = this.#delayMs
    const unbounded =
      delayMs === undefined
        ? (used - delayAfter) * 1000
        : typeof delayMs === 'function'
          ? delayMs(used, ...args)
          : delayMs
    const max = this.#maxDelayMs
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
  ): SlowDownDecision {
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
    if (this.#onDecision !== undefined) this.#observe(request, decision, info)
    return { info, decision }
  }

  #observe(request: Req, decision: HttpDecision, info: SlowDownInfo): void {
    const { result } = decision
    const outcome: DecisionOutcome =
      result.source === 'policy' ? 'failed-open' : info.delay > 0 ? 'delayed' : 'allowed'
    const event: DecisionEvent = {
      limiter: decision.limiter?.name ?? '',
      rule: result.rule.name,
      outcome,
      source: result.source,
      result,
    }
    let route: string | undefined
    try {
      route = this.#binding.route?.(request)
    } catch {
      route = undefined
    }
    if (route !== undefined) event.route = route
    this.#onDecision!(event)
  }

  /**
   * Runs `proceed` (the rest of the chain) after the request's delay, at once when it has none. A client that
   * leaves while delayed (`response` closes) is dropped: its wait is cancelled, `proceed` never runs, and
   * `abandon` runs instead (the adapter ends its part of the request). Arms `skipFailedRequests` and
   * `skipSuccessfulRequests` on `response`; `args` go to `requestWasSuccessful`. `defer` keeps a refund after the
   * response alive (`executionCtx.waitUntil` on Workers).
   */
  proceed(
    { info, decision }: SlowDownDecision,
    args: Args,
    response: TrackedResponse,
    proceed: () => void,
    abandon?: () => void,
    defer?: Defer,
  ): void {
    const state = { ran: info.delay <= 0 }
    if (this.#skipFailed || this.#skipSuccessful) this.#track(decision, args, response, state, defer)
    if (state.ran) {
      proceed()
      return
    }
    if (response.destroyed === true) {
      this.#left(decision, abandon, defer)
      return
    }
    const entry = this.#queue.add(info.delay, () => {
      state.ran = true
      proceed()
    })
    response.once('close', () => {
      if (this.#queue.cancel(entry)) this.#left(decision, abandon, defer)
    })
  }

  /** The client left while delayed: the handler never ran; with `skipFailedRequests`, its count is taken back. */
  #left(decision: HttpDecision, abandon: (() => void) | undefined, defer: Defer | undefined): void {
    if (this.#skipFailed) this.#refund(decision, defer)
    abandon?.()
  }

  /** Delayed requests waiting now, in every middleware on these timers. */
  get waiting(): number {
    return this.#queue.size
  }

  #track(
    decision: HttpDecision,
    args: Args,
    response: TrackedResponse,
    state: { ran: boolean },
    defer: Defer | undefined,
  ): void {
    let judged = false
    const judge = () => {
      if (judged) return
      judged = true
      // Not sent completely (the client left): nothing is taken back once the handler ran (docs/counters.md);
      // a request dropped while delayed is handled by `#left`.
      if (!response.writableFinished || !state.ran) return
      let success: Awaitable<boolean>
      try {
        success = this.#wasSuccessful === undefined ? response.statusCode < 400 : this.#wasSuccessful(...args)
      } catch (error) {
        this.#report(error, { operation: 'refund', key: decision.result.key })
        return
      }
      const settle = (ok: boolean) => {
        if (ok === true ? this.#skipSuccessful : this.#skipFailed) this.#refund(decision, defer)
      }
      if (isThenable(success))
        Promise.resolve(success).then(settle, (error: unknown) =>
          this.#report(error, { operation: 'refund', key: decision.result.key }),
        )
      else settle(success)
    }
    response.once('finish', judge)
    response.once('close', judge)
  }

  #refund(decision: HttpDecision, defer: Defer | undefined): void {
    const { limiter, result } = decision
    if (limiter === undefined) return
    const work = limiter
      .refund(result)
      .catch((error: unknown) => this.#report(error, { operation: 'refund', key: result.key }))
    defer?.(work)
  }

  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void> {
    return this.#limiter.resetKey(key)
  }

  /** Gives up the counters (see `HttpRateLimiter.close`) and closes the memory store made for itself. */
  close(): void {
    this.#limiter.close()
  }
}

const callBindings = new WeakMap<object, FrameworkBinding<never>>()

/**
 * The adapter's binding over the engine's calls (a request with its callback arguments): one per binding, so
 * that its trust-proxy warnings come once for every slowDown() of the adapter.
 */
function callBinding<Req, Args>(binding: FrameworkBinding<Req>): FrameworkBinding<Call<Req, Args>> {
  const known = callBindings.get(binding)
  if (known !== undefined) return known as FrameworkBinding<Call<Req, Args>>
  const made = mapBinding<Req, Args>(binding)
  callBindings.set(binding, made as FrameworkBinding<never>)
  return made
}

function mapBinding<Req, Args>(binding: FrameworkBinding<Req>): FrameworkBinding<Call<Req, Args>> {
  const { permissiveTrustProxy, route } = binding
  return {
    name: binding.name,
    clientIp: (call) => binding.clientIp(call.request),
    untrustedForwardedFor: (call) => binding.untrustedForwardedFor(call.request),
    trustProxyHint: binding.trustProxyHint,
    permissiveTrustProxy: permissiveTrustProxy && ((call) => permissiveTrustProxy(call.request)),
    permissiveTrustProxyHint: binding.permissiveTrustProxyHint,
    route: route && ((call) => route(call.request)),
  }
}

/** What `keyGenerator` returned, checked: the error names slowDown()'s option, not rateLimit()'s `key`. */
function generatedKey(key: unknown): string {
  if (typeof key === 'string') return key
  throw new RateLimitError(
    'ERR_RATEWINDOW_INVALID_KEY',
    `\`keyGenerator\` must return a string; received ${describeValue(key)}.`,
    { option: 'keyGenerator' },
  )
}

/** A number option, or a function of the request. */
function numberOrFunction<T>(
  value: T | undefined,
  option: string,
  fallback: number,
  whole: boolean,
): T | number {
  if (value === undefined) return fallback
  if (typeof value === 'function') return value
  checkDelay(value, option, whole)
  return value
}

/**
 * Checks a count or delay: a number >= 0 (`whole`: a whole number). `Infinity` passes for a delay (`maxDelayMs`
 * unbounded), and a negative delay returned by `delayMs` (`clamped`) counts as none, as in express-slow-down.
 */
function checkDelay(
  value: unknown,
  option: string,
  whole: boolean,
  returned?: string,
  clamped = false,
): asserts value is number {
  const ok =
    typeof value === 'number' &&
    !Number.isNaN(value) &&
    (clamped || value >= 0) &&
    (whole ? Number.isSafeInteger(value) : value === Number.POSITIVE_INFINITY || Number.isFinite(value))
  if (ok) return
  const what = whole ? 'a whole number >= 0' : 'a number of ms >= 0'
  throw new RateLimitError(
    whole ? 'ERR_RATEWINDOW_INVALID_LIMIT' : 'ERR_RATEWINDOW_INVALID_OPTION',
    `\`${option}\` must be ${what}${returned === undefined ? ' or a function' : ` (${returned})`}; received ${describeValue(value)}.`,
    { option },
  )
}
