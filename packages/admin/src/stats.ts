import type { DecisionEvent, DecisionOutcome, RateLimitObserver } from '@ratewindow/core'
import {
  MetricLabels,
  namesOf,
  rejectUnknownOptions,
  requireObject,
  wholeNumber,
} from '@ratewindow/core/support'
import { SpaceSaving } from './space-saving.js'

/** Options of `adminStats()`. */
export interface AdminStatsOptions {
  /**
   * Refused keys counted at once (the Space-Saving sketch's counters, each holding a limiter name and a raw client
   * key): the memory bound of the view. A key refused more than 1 / `capacity` of all refusals is always among them.
   * @default 1000
   */
  capacity?: number
  /** Distinct limiter names counted; decisions of limiters beyond are counted as `other`. @default 100 */
  maxLimiters?: number
  /** The clock of `since`, epoch ms. @default Date.now */
  clock?: () => number
}

/** `GET /stats`: this process's decisions since `since`. */
export interface AdminStatsView {
  /** When this view started counting, epoch ms. */
  since: number
  /** Per limiter name: decisions admitted and refused. */
  decisions: Record<string, { allowed: number; refused: number }>
  /** The most refused keys, most first; `count` may be over by what the sketch inherited (Space-Saving). */
  refused: { limiter: string; key: string; count: number }[]
}

const OPTIONS = namesOf<AdminStatsOptions>({ capacity: true, maxLimiters: true, clock: true })

/** Outcomes that refused the request (the others let it through, at once or later). */
const REFUSED: ReadonlySet<DecisionOutcome> = new Set<DecisionOutcome>([
  'limited',
  'blocked',
  'failed-closed',
  'shed',
])

/**
 * This process's view of its limiters, for the admin endpoint's `GET /stats`: an observer (`onDecision`) to give
 * the limiters, counting decisions per limiter and the keys refused most in a bounded sketch. Per process: N
 * processes hold N views. It adds no store call and keeps at most `capacity` keys.
 * @example
 * const stats = adminStats()
 * const api = new RateLimiter({ rules, store, name: 'api', overrides: true, observer: stats })
 */
export class AdminStats implements RateLimitObserver {
  readonly #labels: MetricLabels
  readonly #sketch: SpaceSaving
  readonly #decisions = new Map<string, { allowed: number; refused: number }>()
  readonly #since: number

  constructor(options: AdminStatsOptions = {}) {
    requireObject(options, 'options', '{ capacity: 1000 }')
    rejectUnknownOptions(options, OPTIONS, 'adminStats')
    const { capacity = 1000, maxLimiters = 100, clock = Date.now } = options
    wholeNumber(capacity, 'capacity', { min: 1 })
    this.#labels = new MetricLabels(maxLimiters, 'maxLimiters')
    this.#sketch = new SpaceSaving(capacity)
    this.#since = clock()
    // Bound once: the limiter calls `observer.onDecision` as a method or as a function.
    this.onDecision = this.onDecision.bind(this)
  }

  /** The observer's callback: counts one decision. */
  onDecision(event: DecisionEvent): void {
    const limiter = this.#labels.limiter(event.limiter)
    let counts = this.#decisions.get(limiter)
    if (counts === undefined) {
      counts = { allowed: 0, refused: 0 }
      this.#decisions.set(limiter, counts)
    }
    if (!REFUSED.has(event.outcome)) {
      counts.allowed += 1
      return
    }
    counts.refused += 1
    // NOTE: one string per (limiter, key), the limiter's length first, so that no name or key can run into another.
    this.#sketch.add(`${limiter.length}:${limiter}${event.result.key}`)
  }

  /** The view: decisions per limiter, and the `count` keys refused most (at most `capacity`). */
  view(count = 20): AdminStatsView {
    const decisions: AdminStatsView['decisions'] = {}
    for (const [limiter, counts] of this.#decisions) decisions[limiter] = { ...counts }
    const refused = this.#sketch.top(count).map(({ item, count }) => {
      const colon = item.indexOf(':')
      const end = colon + 1 + Number(item.slice(0, colon))
      return { limiter: item.slice(colon + 1, end), key: item.slice(end), count }
    })
    return { since: this.#since, decisions, refused }
  }

  /** Refused keys counted at once (the `capacity` option). */
  get capacity(): number {
    return this.#sketch.capacity
  }
}

/** `new AdminStats(options)`: see `AdminStats`. */
export function adminStats(options?: AdminStatsOptions): AdminStats {
  return new AdminStats(options)
}
