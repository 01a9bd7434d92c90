/** Circuit breakers: stop waiting on a store (or one shard of it) that keeps failing, and probe it again later. */

import { type Duration, parseDuration } from '../support/duration.js'
import { invalid } from '../support/errors.js'
import { wholeNumber } from '../support/validators.js'

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit. @default 5 */
  failures?: number
  /** How long an open circuit skips the store before one probe request tries it again. @default '2s' */
  cooldown?: Duration
  /** Time source (ms). @default performance.now */
  clock?: () => number
}

/**
 * Stops waiting on a store that keeps failing: after `failures` consecutive failures the circuit opens and
 * calls skip the store for `cooldown` ms; then a single probe is let through (half-open). A success closes
 * the circuit, a failure opens it for another cooldown.
 */
/** `CircuitBreakerOptions`' defaults, in one place (the `@default` tags above say the same). */
export const CIRCUIT_BREAKER_DEFAULTS = {
  failures: 5,
  cooldown: '2s',
} as const satisfies CircuitBreakerOptions

export class CircuitBreaker {
  readonly #threshold: number
  readonly #cooldown: number
  readonly #clock: () => number
  #consecutiveFailures = 0
  #openUntil = 0
  #probing = false

  constructor(options: CircuitBreakerOptions = {}) {
    const {
      failures = CIRCUIT_BREAKER_DEFAULTS.failures,
      cooldown = CIRCUIT_BREAKER_DEFAULTS.cooldown,
      clock = () => performance.now(),
    } = options
    wholeNumber(failures, 'circuitBreaker.failures', { min: 1, allowed: 'a positive whole number such as 5' })
    if (typeof clock !== 'function') {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'circuitBreaker.clock', clock, 'a function returning ms')
    }
    this.#threshold = failures
    this.#cooldown = parseDuration(cooldown, 'circuitBreaker.cooldown')
    this.#clock = clock
  }

  /** Whether a call may go to the store now (true for the one probe of a half-open circuit). */
  allows(): boolean {
    if (this.#consecutiveFailures < this.#threshold) return true
    if (this.#probing || this.#clock() < this.#openUntil) return false
    this.#probing = true
    return true
  }

  /** Milliseconds until the next probe may run (0 when closed). */
  get retryIn(): number {
    if (this.#consecutiveFailures < this.#threshold) return 0
    return Math.max(0, Math.ceil(this.#openUntil - this.#clock()))
  }

  get state(): 'closed' | 'open' | 'half-open' {
    if (this.#consecutiveFailures < this.#threshold) return 'closed'
    return this.#probing ? 'half-open' : 'open'
  }

  success(): void {
    this.#consecutiveFailures = 0
    this.#probing = false
  }

  failure(): void {
    this.#consecutiveFailures++
    this.#probing = false
    if (this.#consecutiveFailures >= this.#threshold) this.#openUntil = this.#clock() + this.#cooldown
  }
}

/** Most breakers kept at once: one per Cluster slot at worst. Past it the oldest is forgotten. */
export const MAX_SCOPES = 16_384

/**
 * One `CircuitBreaker` per failure domain (a Cluster node or slot, or the whole store), so a dead shard opens
 * only its own circuit. Holds only domains that have failed recently: a success forgets the domain, so the
 * healthy path costs one map lookup, or nothing while no domain has failed.
 */
export class DomainBreakers {
  readonly #options: CircuitBreakerOptions
  readonly #breakers = new Map<string | number, CircuitBreaker>()

  constructor(options: CircuitBreakerOptions = {}) {
    new CircuitBreaker(options) // validates the options once, at construction
    this.#options = options
  }

  /** Whether any domain has failed since its last success (when none has, callers may skip computing one). */
  get idle(): boolean {
    return this.#breakers.size === 0
  }

  allows(domain: string | number): boolean {
    return this.#breakers.get(domain)?.allows() ?? true
  }

  retryIn(domain: string | number): number {
    return this.#breakers.get(domain)?.retryIn ?? 0
  }

  state(domain: string | number): 'closed' | 'open' | 'half-open' {
    return this.#breakers.get(domain)?.state ?? 'closed'
  }

  success(domain: string | number): void {
    this.#breakers.delete(domain)
  }

  failure(domain: string | number): void {
    let breaker = this.#breakers.get(domain)
    if (breaker === undefined) {
      if (this.#breakers.size >= MAX_SCOPES) this.#breakers.delete(this.#breakers.keys().next().value!)
      breaker = new CircuitBreaker(this.#options)
      this.#breakers.set(domain, breaker)
    }
    breaker.failure()
  }
}
