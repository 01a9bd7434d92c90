import type { Rule } from '../algorithms/types.js'

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

/** Adds every count of `from` to `into`. */
export function mergeCounts(into: WindowCounts, from: WindowCounts): void {
  addCounts(into, from.win - 1, from.prev)
  addCounts(into, from.win, from.curr)
}

/** Counts of `counts` seen from window `win`: [in `win`, in `win − 1`]. */
function countsAt(counts: WindowCounts, win: number): [number, number] {
  if (counts.win === win) return [counts.curr, counts.prev]
  if (counts.win === win - 1) return [0, counts.curr]
  return [0, 0]
}

/**
 * @internal Writes into a rule's algorithm state (the shape its `AlgorithmLogic` works on) the sum of the
 * given counts, as seen from window `win`, never below zero.
 */
export type StateWriter = (state: unknown, win: number, parts: readonly WindowCounts[]) => void

function sumAt(parts: readonly WindowCounts[], win: number): [number, number] {
  let curr = 0
  let prev = 0
  for (const part of parts) {
    const [c, p] = countsAt(part, win)
    curr += c
    prev += p
  }
  return [Math.max(0, curr), Math.max(0, prev)]
}

/** @internal The algorithms whose state is counts per fixed window, and so can be synchronised by deltas. */
export const COUNTER_STATES: Partial<Record<Rule['algorithm'], StateWriter>> = {
  'sliding-window-counter': (state, win, parts) => {
    const target = state as WindowCounts
    const [curr, prev] = sumAt(parts, win)
    target.win = win
    target.curr = curr
    target.prev = prev
  },
  'fixed-window': (state, win, parts) => {
    const target = state as { win: number; count: number }
    target.win = win
    target.count = sumAt(parts, win)[0]
  },
}
