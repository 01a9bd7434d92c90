import { LeaseGateway } from '../gateway/lease-gateway.js'
import type { FailureContext } from '../observe.js'
import { defaultMemoryStore } from '../stores/local/memory.js'
import type { ConcurrencyStore, LeaseRequest } from '../stores/types.js'
import { type Duration, parseTimerDuration } from '../support/duration.js'
import { invalid, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { guardedReporter, throttledErrorLog } from '../support/report.js'
import { randomUUID } from '../support/runtime.js'
import { fnOption, keyArgument, oneOf, prefixOption, wholeNumber } from '../support/validators.js'
import { type DelayTimers, PLATFORM_TIMERS, unref } from '../time/timers.js'
import { LIMITER_DEFAULTS } from './options.js'

export interface ConcurrencyLimiterOptions {
  /** Most requests in flight at once per key: a positive whole number. */
  limit: number
  /**
   * The longest a slot is held without a release (with `renew`: without its process renewing it). A process that
   * dies holding slots gives them back after it. Without `renew`, make it longer than the slowest request.
   * @default '1m'
   */
  lease?: Duration
  /**
   * Renew the slots held every half lease until they are released, so that a request longer than `lease` keeps its
   * slot: for work that releases its slot on every path (an adapter's `finally`). A slot its holder never releases
   * is then held as long as its process runs. @default false
   */
  renew?: boolean
  /** Where leases live (a store shared with rate limits is fine). @default new MemoryStore() */
  store?: ConcurrencyStore
  /** Namespace for this limiter's keys. @default 'rwc' */
  prefix?: string
  /** Longest wait for the store before the failure policy answers. @default '250ms' */
  timeout?: Duration
  /** When the store fails: `'allow'` (fail open) or `'deny'`. @default 'allow' */
  onStoreError?: 'allow' | 'deny'
  /** Receives every store failure (a throw in it is caught). @default a throttled console.error */
  onError?: (error: unknown, context: { operation: 'acquire' | 'release'; key: string }) => unknown
}

/** The first wait before failed releases are tried again; it doubles up to RELEASE_RETRY_MAX_MS while they fail. */
const RELEASE_RETRY_FIRST_MS = 100
const RELEASE_RETRY_MAX_MS = 2_000
const CONCURRENCY_LIMITER_OPTIONS = namesOf<ConcurrencyLimiterOptions>({
  limit: true,
  lease: true,
  renew: true,
  store: true,
  prefix: true,
  timeout: true,
  onStoreError: true,
  onError: true,
})
/** `ConcurrencyLimiterOptions`' defaults, in one place: the limiter's own where they mean the same. */
export const CONCURRENCY_DEFAULTS = {
  lease: '1m',
  prefix: 'rwc',
  timeout: LIMITER_DEFAULTS.timeout,
  onStoreError: LIMITER_DEFAULTS.onStoreError,
} as const satisfies Partial<ConcurrencyLimiterOptions>

/** A slot, or the refusal of one. */
export interface ConcurrencyResult {
  allowed: boolean
  limit: number
  /** Slots still free after this decision. */
  remaining: number
  /** Requests in flight for the key, this one included when allowed. */
  inFlight: number
  key: string
  /** Where the decision came from: the store, or the failure policy when the store failed. */
  source: 'store' | 'policy'
  /**
   * Gives the slot back (once; later calls do nothing). Never rejects: failures go to `onError`, and a release
   * the store failed is tried again in the background until it answers (or the lease runs out).
   */
  release(): Promise<void>
}

/**
 * At most `limit` requests in flight per key, on memory or Redis. Each admitted request holds a lease until it
 * calls `release()` (adapters do it when the handler's work is done, not when the client leaves), or until the
 * lease time passes (with `renew`, until its process stops renewing it), so a crashed process never leaks slots
 * forever.
 * @example
 * const limiter = new ConcurrencyLimiter({ limit: 2, lease: '30s' })
 * const slot = await limiter.acquire('user:alice')
 * if (slot.allowed) try { await work() } finally { await slot.release() }
 */
export class ConcurrencyLimiter {
  readonly limit: number
  readonly leaseMs: number
  readonly store: ConcurrencyStore
  readonly prefix: string
  readonly #renew: boolean
  readonly #allowOnError: boolean
  /** Every call to the store goes through here (acquire and release: timeout and `onError`; no breaker). */
  readonly #gateway: LeaseGateway
  /** Releases the store failed, with when their leases run out by themselves (epoch ms): tried again. */
  readonly #unreleased = new Map<LeaseRequest, number>()
  /**
   * The clock of lease expiries and the timer of the retries: the application's time (a test's fake timers drive
   * the retries), as before the timers had one family.
   */
  readonly #timers: DelayTimers = PLATFORM_TIMERS
  #retryTimer: unknown
  #retrying = false
  #retryDelay = RELEASE_RETRY_FIRST_MS
  /** The slots held now, with when each was taken or last renewed (the timers' ms): renewed until released. */
  readonly #held = new Map<LeaseRequest, number>()
  #renewTimer: unknown

  constructor(options: ConcurrencyLimiterOptions) {
    requireObject(options, 'options', '{ limit: 10 }')
    rejectUnknownOptions(options, CONCURRENCY_LIMITER_OPTIONS, 'ConcurrencyLimiter')
    const {
      limit,
      lease = CONCURRENCY_DEFAULTS.lease,
      store = defaultMemoryStore(),
      prefix = CONCURRENCY_DEFAULTS.prefix,
      timeout = CONCURRENCY_DEFAULTS.timeout,
      onStoreError = CONCURRENCY_DEFAULTS.onStoreError,
      onError = throttledErrorLog(),
      renew = false,
    } = options
    wholeNumber(limit, 'limit', {
      min: 1,
      allowed: 'a positive whole number such as 10',
      code: 'ERR_RATEWINDOW_INVALID_LIMIT',
    })
    if (typeof store?.acquire !== 'function' || typeof store.release !== 'function') {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'store',
        store,
        'a store with acquire and release (MemoryStore, RedisStore)',
      )
    }
    prefixOption(prefix, 160)
    oneOf(onStoreError, 'onStoreError', ['allow', 'deny'])
    fnOption(onError, 'onError')
    if (typeof renew !== 'boolean')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'renew', renew, 'true or false')
    this.#renew = renew
    this.limit = limit
    this.leaseMs = parseTimerDuration(lease, 'lease')
    this.store = store
    this.prefix = prefix
    this.#allowOnError = onStoreError === 'allow'
    this.#gateway = new LeaseGateway(store, {
      limiter: prefix,
      role: 'store',
      timeoutMs: parseTimerDuration(timeout, 'timeout'),
      // Only acquire and release are reported through this gateway: the narrower context of this `onError`.
      onError: guardedReporter(onError) as (error: unknown, context: FailureContext) => void,
    })
  }

  /** Takes a slot for `key` if one is free. Never rejects for a store failure (the failure policy answers). */
  async acquire(key: string): Promise<ConcurrencyResult> {
    keyArgument(key)
    const request: LeaseRequest = {
      prefix: this.prefix,
      key,
      id: randomUUID(),
      limit: this.limit,
      leaseMs: this.leaseMs,
    }
    const started = this.#timers.now()
    const decision = await this.#gateway.acquire(request, (late) => {
      // The lease was taken after all, perhaps after the release below reached the store: release it again.
      if (late.allowed) void this.#release(request, started)
    })
    if (decision === undefined) {
      // A lease may still have been taken: release it in the background when the policy lets the request in,
      // and also when it refuses it, so that a late acquire never holds a slot until its lease expires.
      void this.#release(request, started)
      return this.#result(key, this.#allowOnError, 0, 'policy', async () => {})
    }
    let released = !decision.allowed
    if (decision.allowed && this.#renew) this.#hold(request, started)
    return this.#result(key, decision.allowed, decision.inFlight, 'store', async () => {
      if (released) return
      released = true
      this.#held.delete(request)
      await this.#release(request, started)
    })
  }

  /**
   * With `renew`, a slot is held as long as its request runs, however long: every half lease, the slots held for a
   * quarter of one or more are acquired again by their own ids, which renews them (a lease runs out only when its
   * process stops renewing it: it died, or lost the store). One timer for all of them, while any is held.
   */
  #hold(request: LeaseRequest, at: number): void {
    this.#held.set(request, at)
    if (this.#renewTimer !== undefined) return
    const tick = () => {
      this.#renewTimer = undefined
      const now = this.#timers.now()
      for (const [held, since] of this.#held)
        if (now - since >= this.leaseMs / 4) void this.#renewOne(held, now)
      if (this.#held.size > 0) {
        this.#renewTimer = this.#timers.setTimeout(tick, this.leaseMs / 2)
        unref(this.#renewTimer)
      }
    }
    this.#renewTimer = this.#timers.setTimeout(tick, this.leaseMs / 2)
    // A process that ends meanwhile leaves its leases to run out in the store.
    unref(this.#renewTimer)
  }

  async #renewOne(request: LeaseRequest, now: number): Promise<void> {
    this.#held.set(request, now)
    const decision = await this.#gateway.acquire(request, (late) => {
      if (late.allowed && !this.#held.has(request)) void this.#release(request, now)
    })
    // Released while the renewal was on its way: the renewal may have put the lease back, so it goes again.
    if (!this.#held.has(request)) {
      if (decision?.allowed) void this.#release(request, now)
      return
    }
    // The store no longer has a place for it (its state was lost meanwhile): nothing is held to renew.
    if (decision !== undefined && !decision.allowed) this.#held.delete(request)
  }

  /**
   * Gives a lease back. When the store fails (a restart, a Cluster failover), the release is kept and tried again
   * in the background until the store answers or the lease has run out by itself: removing a lease id is
   * idempotent, so the slot comes back as soon as the store answers again, not when the lease expires. Resolves
   * after the first attempt.
   */
  async #release(request: LeaseRequest, started: number): Promise<void> {
    if (await this.#gateway.release(request)) return
    this.#unreleased.set(request, started + this.leaseMs)
    this.#retryLater()
  }

  #retryLater(): void {
    if (this.#retryTimer !== undefined || this.#retrying || this.#unreleased.size === 0) return
    this.#retryTimer = this.#timers.setTimeout(() => {
      this.#retryTimer = undefined
      void this.#retryReleases()
    }, this.#retryDelay)
    // A process that ends meanwhile leaves its leases to run out in the store.
    unref(this.#retryTimer)
  }

  /**
   * One round of retries: one release first, as a probe (while the store still fails, a round costs one call and
   * one `onError` report, however many releases wait); once it answers, all the others at once. The wait between
   * rounds doubles while the store fails (RELEASE_RETRY_FIRST_MS to RELEASE_RETRY_MAX_MS).
   */
  async #retryReleases(): Promise<void> {
    this.#retrying = true
    try {
      const now = this.#timers.now()
      const due: LeaseRequest[] = []
      for (const [request, expires] of this.#unreleased) {
        // Past its expiry the store has dropped the lease by itself.
        if (now >= expires) this.#unreleased.delete(request)
        else due.push(request)
      }
      const [probe, ...rest] = due
      if (probe === undefined) return
      if (!(await this.#gateway.release(probe))) {
        this.#retryDelay = Math.min(this.#retryDelay * 2, RELEASE_RETRY_MAX_MS)
        return
      }
      this.#unreleased.delete(probe)
      this.#retryDelay = RELEASE_RETRY_FIRST_MS
      const done = await Promise.all(rest.map((request) => this.#gateway.release(request)))
      for (const [i, request] of rest.entries()) if (done[i]) this.#unreleased.delete(request)
    } finally {
      this.#retrying = false
      this.#retryLater()
    }
  }

  #result(
    key: string,
    allowed: boolean,
    inFlight: number,
    source: 'store' | 'policy',
    release: () => Promise<void>,
  ): ConcurrencyResult {
    return {
      allowed,
      limit: this.limit,
      remaining: Math.max(0, this.limit - inFlight),
      inFlight,
      key,
      source,
      release,
    }
  }
}
