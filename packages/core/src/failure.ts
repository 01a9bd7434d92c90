import { type Duration, parseDuration } from './duration.js'
import { invalid, RateLimitError } from './errors.js'

/** Settles like `pending`, or rejects with ERR_RATEWINDOW_STORE_TIMEOUT after `ms`. Never leaves a rejection unhandled. */
export function withTimeout<T>(pending: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new RateLimitError('ERR_RATEWINDOW_STORE_TIMEOUT', `${what} took longer than ${ms} ms.`))
    }, ms)
    timer.unref()
    pending.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}

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
export class CircuitBreaker {
  readonly #threshold: number
  readonly #cooldown: number
  readonly #clock: () => number
  #consecutiveFailures = 0
  #openUntil = 0
  #probing = false

  constructor(options: CircuitBreakerOptions = {}) {
    const { failures = 5, cooldown = '2s', clock = () => performance.now() } = options
    if (!Number.isSafeInteger(failures) || failures < 1) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'circuitBreaker.failures',
        failures,
        'a positive whole number such as 5',
      )
    }
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

/**
 * The default `onError`: never silent, never a flood. Logs the first failure, then at most one summary line
 * per interval while failures continue.
 */
export function throttledErrorLog(intervalMs = 10_000, log: (line: string) => void = console.error) {
  let lastLog = Number.NEGATIVE_INFINITY
  let suppressed = 0
  return (error: unknown): void => {
    const now = performance.now()
    if (now - lastLog < intervalMs) {
      suppressed++
      return
    }
    const more = suppressed > 0 ? ` (and ${suppressed} more since the last report)` : ''
    log(`[ratewindow] store failure${more}: ${error instanceof Error ? error.message : String(error)}`)
    lastLog = now
    suppressed = 0
  }
}
