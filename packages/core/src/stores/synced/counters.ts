import type { Rule } from '../../algorithms/types.js'

/**
 * @internal Counts of one rule in two adjacent fixed windows: `curr` in window `win`, `prev` in `win − 1`. The
 * shape of the shared state in Redis, of a process's view of it, and of its unsent deltas alike.
 */
export interface WindowCounts {
  win: number
  curr: number
  prev: number
}

export const emptyCounts = (): WindowCounts => ({ win: Number.NEGATIVE_INFINITY, curr: 0, prev: 0 })

/**
 * Adds `count` units counted in window `win` to `counts`, keeping the two newest windows only: a window two
 * behind the newest no longer weighs on a sliding window counter's (or a fixed window's) decision.
 */
export function addCounts(counts: WindowCounts, win: number, count: number): void {
  if (count === 0) return
  if (win === counts.win) counts.curr += count
  else if (win === counts.win - 1) counts.prev += count
  else if (win > counts.win) {
    counts.prev = win === counts.win + 1 ? counts.curr : 0
    counts.curr = count
    counts.win = win
  }
}

/** Empties `counts` in place. */
export function clearCounts(counts: WindowCounts): void {
  counts.win = Number.NEGATIVE_INFINITY
  counts.curr = 0
  counts.prev = 0
}

/** Adds every count of `from` to `into`. */
export function mergeCounts(into: WindowCounts, from: WindowCounts): void {
  addCounts(into, from.win - 1, from.prev)
  addCounts(into, from.win, from.curr)
}

/** The newest window any of the three counts of a rule holds (-Infinity when all are empty). */
export const newestWindow = (view: WindowCounts, sent: WindowCounts, unsent: WindowCounts): number =>
  Math.max(view.win, sent.win, unsent.win)

/** Units of `counts` in window `win`. */
const currAt = (counts: WindowCounts, win: number): number => (counts.win === win ? counts.curr : 0)

/** Units of `counts` in window `win − 1`. */
const prevAt = (counts: WindowCounts, win: number): number =>
  counts.win === win ? counts.prev : counts.win === win - 1 ? counts.curr : 0

/**
 * @internal Units a process knows of in window `win`: the shared view's, the sent and the unsent ones, never below
 * zero (what a counter algorithm's state counts in its current window).
 */
export const countIn = (win: number, view: WindowCounts, sent: WindowCounts, unsent: WindowCounts): number =>
  Math.max(0, currAt(view, win) + currAt(sent, win) + currAt(unsent, win))

/**
 * @internal Writes into a rule's algorithm state (the shape its `AlgorithmLogic` works on) the sum of the three
 * counts a process knows of (the shared view, the sent and the unsent ones), as seen from window `win`, never
 * below zero. Called on every decision: no allocation. `limit`: the rule's limit in force. Returns the units the
 * state counts in `win` beyond what was counted in it: a fixed window's debt carried from the window before, which
 * the counts will not carry again (0 for the others).
 */
export type StateWriter = (
  state: unknown,
  win: number,
  view: WindowCounts,
  sent: WindowCounts,
  unsent: WindowCounts,
  limit: number,
) => number

/** @internal The algorithms whose state is counts per fixed window, and so can be synchronised by deltas. */
export const COUNTER_STATES: Partial<Record<Rule['algorithm'], StateWriter>> = {
  'sliding-window-counter': (state, win, view, sent, unsent) => {
    const target = state as WindowCounts
    target.win = win
    target.curr = countIn(win, view, sent, unsent)
    target.prev = Math.max(0, prevAt(view, win) + prevAt(sent, win) + prevAt(unsent, win))
    return 0
  },
  'fixed-window': (state, win, view, sent, unsent, limit) => {
    const target = state as { win: number; count: number; debt: number }
    target.win = win
    // NOTE: what the previous window counted beyond the limit (a settle's debt) carries into this one, as the
    // fixed window's `advance` carries it. The counters keep two windows: a carry into the previous window from
    // the one before it is not carried again (SyncedStore's bound on a debt, docs/policies.md). Counts hold no
    // debt apart: all of a count past the limit is owed (SyncedStore decides no plans, whose lowered limits would
    // make a count past the limit that is no debt: those go to its RedisStore).
    const carried = Math.max(0, prevAt(view, win) + prevAt(sent, win) + prevAt(unsent, win) - limit)
    target.count = countIn(win, view, sent, unsent) + carried
    target.debt = Math.max(0, target.count - limit)
    return carried
  },
}
