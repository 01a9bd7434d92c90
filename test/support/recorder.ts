/**
 * What a limiter reported to the test, recorded as it came: every `onError` call with its context, and every
 * observer event by kind. Pass `onError` and `observer` to a limiter or a middleware, then read the lists or
 * ask `outcomes()`.
 */
import type { BreakerEvent, DecisionEvent, FailureContext, StoreCallEvent } from '@ratewindow/core'

/** One `onError` call: the error, its `code` when it has one, and the fields of its context. */
export interface ErrorReport extends Partial<FailureContext> {
  error: unknown
  code: string | undefined
}

export interface Recorder {
  /** The errors `onError` was given, in order. */
  errors: unknown[]
  /** Each `onError` call, in order, with its context. */
  reports: ErrorReport[]
  decisions: DecisionEvent[]
  calls: StoreCallEvent[]
  breakers: BreakerEvent[]
  /** The limiter's `onError`. */
  onError(error: unknown, context?: FailureContext): void
  /** The limiter's `observer`. */
  observer: {
    onDecision(event: DecisionEvent): void
    onStoreCall(event: StoreCallEvent): void
    onBreaker(event: BreakerEvent): void
  }
  /** `outcome/source` of each decision in order (of limiter `name` only, when given), e.g. `limited/cache`. */
  outcomes(name?: string): string[]
  /** Forgets what was recorded: for one recorder shared by the tests of a `describe`. */
  clear(): void
}

export function recorder(): Recorder {
  const errors: unknown[] = []
  const reports: ErrorReport[] = []
  const decisions: DecisionEvent[] = []
  const calls: StoreCallEvent[] = []
  const breakers: BreakerEvent[] = []
  return {
    errors,
    reports,
    decisions,
    calls,
    breakers,
    onError(error, context) {
      errors.push(error)
      reports.push({ ...context, error, code: (error as { code?: string } | undefined)?.code })
    },
    observer: {
      onDecision: (event) => void decisions.push(event),
      onStoreCall: (event) => void calls.push(event),
      onBreaker: (event) => void breakers.push(event),
    },
    outcomes: (name) =>
      decisions
        .filter((event) => name === undefined || event.limiter === name)
        .map((event) => `${event.outcome}/${event.source}`),
    clear() {
      for (const list of [errors, reports, decisions, calls, breakers]) list.length = 0
    },
  }
}
