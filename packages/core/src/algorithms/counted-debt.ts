/**
 * A count with its debt apart (the fixed window, the quota): a charge may take the count past the limit, and only
 * what a charge takes past it is owed from the next window or period; a count above a limit lowered since (a
 * downgraded plan, a lowered override, a raise that ended) is no debt and ends with its window or period. Both
 * twins of both algorithms count so: here once, in JavaScript and in Lua.
 */

/** A state that counts units, with the debt apart (absent in a fixed-window state kept before it was tracked). */
export interface CountedDebt {
  count: number
  debt?: number
}

/** Counts `cost` more: the debt grows by what this charge takes past `limit`, never by a count already above it. */
export function countWithDebt(state: CountedDebt, limit: number, cost: number): void {
  const above = Math.max(0, state.count - limit)
  state.count += cost
  state.debt = (state.debt ?? 0) + Math.max(0, state.count - limit) - above
}

/** Gives `cost` back: the count never below 0, the debt never above what the count still holds past `limit`. */
export function giveBackWithDebt(state: CountedDebt, limit: number, cost: number): void {
  state.count = Math.max(0, state.count - cost)
  state.debt = Math.min(state.debt ?? 0, Math.max(0, state.count - limit))
}

/** Lua twin of `countWithDebt`: statements on the variables `count` and `debt`, the limit `limit`. */
export function luaCountWithDebt(count: string, debt: string, limit: string, cost: string): string {
  // PERF: an admitted request (the common call) ends within the limit and leaves the debt as it is: one compare.
  return `do
  local before = ${count}
  ${count} = ${count} + ${cost}
  if ${count} > ${limit} then ${debt} = ${debt} + ${count} - ${limit} - math.max(0, before - ${limit}) end
end
`
}

/** Lua twin of `giveBackWithDebt`. */
export function luaGiveBackWithDebt(count: string, debt: string, limit: string, cost: string): string {
  return `  ${count} = math.max(0, ${count} - ${cost})
  ${debt} = math.min(${debt}, math.max(0, ${count} - ${limit}))
`
}
