import { windowRule } from './rule.js'
import type { AlgorithmLogic, LuaTwin, Rule, WindowAlgorithmDefinition, WindowRuleOptions } from './types.js'

interface FixedWindowState {
  /** Window index: floor(now / window). Never goes back, even when the clock does. */
  win: number
  count: number
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
   * The wait until the window in which `count` (counted now) leaves room for `cost`: what is counted beyond the
   * limit carries into the following windows, `limit` of it passing per window (see `advance`).
   */
  const waitFor = (state: FixedWindowState, now: number, count: number, cost: number) =>
    windowEnd(state, now) + (Math.max(1, Math.ceil((count + cost - limit) / limit)) - 1) * windowMs
  return {
    create: () => ({ win: Number.NEGATIVE_INFINITY, count: 0 }),
    advance(state, now) {
      // NOTE: only forward. A clock stepping back a few ms across a boundary keeps the newer window and its
      // count; resetting to the older window would start a third count.
      const win = Math.floor(now / windowMs)
      if (win > state.win) {
        // NOTE: units counted beyond the limit (a settle's debt, or a lowered limit) carry into the following
        // windows, `limit` of them passing per window: the rule's rate, never a fresh window's burst.
        state.count = Math.max(0, state.count - (win - state.win) * limit)
        state.win = win
      }
    },
    fits: (state, _now, cost) => state.count + cost <= limit,
    consume(state, _now, cost) {
      state.count += cost
    },
    refund(state, _now, cost, at) {
      if (Math.floor(at / windowMs) === state.win) state.count = Math.max(0, state.count - cost)
    },
    report(state, now, pending, deniedCost, into, i) {
      const count = state.count + pending
      const denied = count + deniedCost > limit
      into.remaining[i] = Math.max(0, limit - count)
      into.reset[i] = count > 0 ? waitFor(state, now, count, limit) : 0
      // The next window admits again unless units carry into it (a validated cost never exceeds the limit).
      into.retryAfter[i] = denied ? waitFor(state, now, count, deniedCost) : 0
    },
    ttl: (state, now) => (state.count > 0 ? waitFor(state, now, state.count, limit) : 0),
    used: (state) => state.count,
    // Before `advance`: what the window counted beyond the new limit never carries into the next.
    clamp(state) {
      state.count = Math.min(state.count, limit)
    },
  }
}

/**
 * Lua twin of `fixedWindowLogic`. Key: a string `"<window index>:<count>"` with its TTL, the end of the window
 * (or of the last window the count carries into). A key of an earlier window carries its count beyond the limit
 * into this one. Another type or content marks the state `broken`: the script deletes the key and starts afresh.
 * NOTE: every write sets the TTL (`SET … PX`), unlike the counter's: a key of this format is easily written by
 * hand without one, and an admitted request must give it one.
 */
const LUA: LuaTwin = {
  params: 2,
  state: ['win', 'count', 'broken'],
  load: (r) => {
    const [L, W] = r.params
    const [win, count] = ['win', 'count'].map(r.v)
    return `${win}, ${count} = math.floor(now / ${W}), 0
do
  local raw = redis.pcall('GET', ${r.key})
  if raw then
    local w, c
    if type(raw) == 'string' then w, c = string.match(raw, '^(%-?%d+):(%d+)$') end
    if not w then ${r.v('broken')} = true
    elseif tonumber(w) >= ${win} then ${win}, ${count} = tonumber(w), tonumber(c)
    else ${count} = math.max(0, tonumber(c) - (${win} - tonumber(w)) * ${L}) end
  end
end
`
  },
  clamp: (r) => `do
  local raw = redis.pcall('GET', ${r.key})
  local w, c
  if type(raw) == 'string' then w, c = string.match(raw, '^(%-?%d+):(%d+)$') end
  if w and tonumber(c) > ${r.params[0]} then redis.call('SET', ${r.key}, w .. ':' .. num(${r.params[0]}), 'KEEPTTL') end
end
`,
  fits: (r, cost) => `${r.v('count')} + ${cost} <= ${r.params[0]}`,
  consume: (r, cost) => `${r.v('count')} = ${r.v('count')} + ${cost}
`,
  refund: (r, cost, at) =>
    `if math.floor(${at} / ${r.params[1]}) == ${r.v('win')} then ${r.v('count')} = math.max(0, ${r.v('count')} - ${cost}) end
`,
  report: (r, pending, denied) => {
    const [L, W] = r.params
    const [win, count] = ['win', 'count'].map(r.v)
    return `do
  local count, windowEnd = ${count} + ${pending}, (${win} + 1) * ${W} - now
  remaining, reset, retry = math.max(0, ${L} - count), 0, 0
  if count > 0 then reset = windowEnd + (math.ceil(count / ${L}) - 1) * ${W} end
  if count + ${denied} > ${L} then retry = windowEnd + (math.max(1, math.ceil((count + ${denied} - ${L}) / ${L})) - 1) * ${W} end
end
`
  },
  persist: (r) => {
    const [L, W] = r.params
    const [win, count] = ['win', 'count'].map(r.v)
    return `if ${count} > 0 then redis.call('SET', ${r.key}, num(${win}) .. ':' .. num(${count}), 'PX', (${win} + math.ceil(${count} / ${L})) * ${W} - now)
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
