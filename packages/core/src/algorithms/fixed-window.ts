import { countWithDebt, giveBackWithDebt, luaCountWithDebt, luaGiveBackWithDebt } from './counted-debt.js'
import { windowRule } from './rule.js'
import type { AlgorithmLogic, LuaTwin, Rule, WindowAlgorithmDefinition, WindowRuleOptions } from './types.js'

interface FixedWindowState {
  /** Window index: floor(now / window). Never goes back, even when the clock does. */
  win: number
  count: number
  /**
   * What charges took past the limit (a settle's debt), owed from the next windows; never a count above a limit
   * lowered since (a downgraded plan, a lowered override), which ends with its window. Absent in a state kept before
   * it was tracked: none.
   */
  debt?: number
}

const CODE = 1

/**
 * Fixed window: one counter per `floor(now / window)`. O(1) memory and the cheapest Redis script.
 *
 * Trade-off: up to 2 × `limit` can pass across a boundary (the end of one window and the start of the next).
 * Prefer `slidingWindowCounter` unless that burst is acceptable.
 * @example fixedWindow({ limit: 100, window: '1m' })
 */
export function fixedWindow(options: WindowRuleOptions): Rule {
  return windowRule('fixed-window', CODE, options, fixedWindowLogic)
}

function fixedWindowLogic(limit: number, windowMs: number): AlgorithmLogic<FixedWindowState> {
  const windowEnd = (state: FixedWindowState, now: number) => (state.win + 1) * windowMs - now
  /**
   * The wait until a window leaves room for `cost` once this one has ended: the debt carries into the following
   * windows, `limit` of it passing per window (see `advance`).
   */
  const waitFor = (state: FixedWindowState, now: number, cost: number) =>
    windowEnd(state, now) + Math.max(0, Math.ceil(((state.debt ?? 0) + cost - limit) / limit)) * windowMs
  return {
    create: () => ({ win: Number.NEGATIVE_INFINITY, count: 0, debt: 0 }),
    advance(state, now) {
      // NOTE: only forward. A clock stepping back a few ms across a boundary keeps the newer window and its
      // count; resetting to the older window would start a third count.
      const win = Math.floor(now / windowMs)
      if (win > state.win) {
        // NOTE: a debt (units a charge took past the limit) carries into the following windows, `limit` of it
        // passing per window: the rule's rate, never a fresh window's burst. A count above the limit that was no
        // debt (admitted under a higher limit) ends with its window.
        state.count = Math.max(0, (state.debt ?? 0) - (win - state.win - 1) * limit)
        state.debt = Math.max(0, state.count - limit)
        state.win = win
      }
    },
    fits: (state, _now, cost) => state.count + cost <= limit,
    // Only what a charge takes past the limit is owed from the next windows (counted-debt.ts).
    consume: (state, _now, cost) => countWithDebt(state, limit, cost),
    refund(state, _now, cost, at) {
      if (Math.floor(at / windowMs) === state.win) giveBackWithDebt(state, limit, cost)
    },
    report(state, now, pending, deniedCost, into, i) {
      const count = state.count + pending
      const denied = count + deniedCost > limit
      into.remaining[i] = Math.max(0, limit - count)
      into.reset[i] = count > 0 ? waitFor(state, now, limit) : 0
      // The next window admits again unless a debt carries into it (a validated cost never exceeds the limit).
      into.retryAfter[i] = denied ? waitFor(state, now, deniedCost) : 0
    },
    ttl: (state, now) => (state.count > 0 ? waitFor(state, now, limit) : 0),
    used: (state) => state.count,
  }
}

/**
 * Lua twin of `fixedWindowLogic`. Key: a string `"<window index>:<count>"`, or `"<window index>:<count>:<debt>"`
 * while a charge left a debt, with its TTL: the end of the window (or of the last window the debt carries into). A
 * key of an earlier window carries its debt into this one. Another type or content marks the state `broken`: the
 * script deletes the key and starts afresh.
 * NOTE: a state kept before the debt was tracked (`"<window>:<count>"`, a count above the limit carried whole) reads
 * as one without debt: a count above the limit then ends with its window.
 * NOTE: every write sets the TTL (`SET … PX`), unlike the counter's: a key of this format is easily written by
 * hand without one, and an admitted request must give it one.
 */
const LUA: LuaTwin = {
  params: 2,
  state: ['win', 'count', 'fdebt', 'broken', 'convert'],
  load: (r) => {
    const [L, W] = r.params
    const [win, count, debt] = ['win', 'count', 'fdebt'].map(r.v)
    return `${win}, ${count}, ${debt} = math.floor(now / ${W}), 0, 0
do
  local raw = redis.pcall('GET', ${r.key})
  if raw then
    local w, c, d
    if type(raw) == 'string' then
      -- PERF: the usual state holds no debt: the shorter pattern first.
      w, c = string.match(raw, '^(%-?%d+):(%d+)$')
      if not w then w, c, d = string.match(raw, '^(%-?%d+):(%d+):(%d+)$') end
    end
    if not w then ${r.v('broken')} = true
    else
      d = tonumber(d) or 0
      if tonumber(w) >= ${win} then ${win}, ${count}, ${debt} = tonumber(w), tonumber(c), d
      else
        ${count} = math.max(0, d - (${win} - tonumber(w) - 1) * ${L})
        ${debt} = math.max(0, ${count} - ${L})
        -- A debt carried into this window is kept as carried even by a refused request (as MemoryStore keeps the
        -- window it advanced to): a later window's carry then never depends on which limit was in force at a
        -- request that was not written (a plan or an override changing meanwhile).
        if d > 0 and (mode == '0' or mode == '4') then ${r.v('convert')} = true end
      end
    end
  end
end
`
  },
  fits: (r, cost) => `${r.v('count')} + ${cost} <= ${r.params[0]}`,
  consume: (r, cost) => luaCountWithDebt(r.v('count'), r.v('fdebt'), r.params[0]!, cost),
  refund: (r, cost, at) => {
    const [L, W] = r.params
    return `if math.floor(${at} / ${W}) == ${r.v('win')} then
${luaGiveBackWithDebt(r.v('count'), r.v('fdebt'), L!, cost)}end
`
  },
  report: (r, pending, denied) => {
    const [L, W] = r.params
    const [win, count, debt] = ['win', 'count', 'fdebt'].map(r.v)
    return `do
  local count, windowEnd = ${count} + ${pending}, (${win} + 1) * ${W} - now
  remaining, reset, retry = math.max(0, ${L} - count), 0, 0
  if count > 0 then reset = windowEnd + math.max(0, math.ceil(${debt} / ${L})) * ${W} end
  if count + ${denied} > ${L} then retry = windowEnd + math.max(0, math.ceil((${debt} + ${denied} - ${L}) / ${L})) * ${W} end
end
`
  },
  persist: (r) => {
    const [L, W] = r.params
    const [win, count, debt] = ['win', 'count', 'fdebt'].map(r.v)
    return `if ${count} > 0 then
  local value = num(${win}) .. ':' .. num(${count})
  if ${debt} > 0 then value = value .. ':' .. num(${debt}) end
  redis.call('SET', ${r.key}, value, 'PX', (${win} + 1 + math.ceil(${debt} / ${L})) * ${W} - now)
else redis.call('DEL', ${r.key}) end
`
  },
  used: (r) => r.v('count'),
  limit: (r) => r.params[0]!,
}

/** @internal */
export const FIXED_WINDOW: WindowAlgorithmDefinition = {
  name: 'fixed-window',
  code: CODE,
  lua: LUA,
  fromLimit: (limit, window) => fixedWindow({ limit, window }),
}
