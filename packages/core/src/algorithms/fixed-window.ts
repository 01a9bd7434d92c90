import { windowRule } from './rule.js'
import type { AlgorithmLogic, Rule, WindowRuleOptions } from './types.js'

interface FixedWindowState {
  /** Window index: floor(now / window). */
  win: number
  count: number
}

/** @internal */
export const FIXED_WINDOW_CODE = 1

/**
 * Fixed window: one counter per `floor(now / window)`. O(1) memory and the cheapest Redis script.
 *
 * Trade-off: up to 2 × `limit` can pass across a boundary (the end of one window and the start of the next).
 * Prefer `slidingWindowCounter` unless that burst is acceptable.
 * @example fixedWindow({ limit: 100, window: '1m' })
 */
export function fixedWindow(options: WindowRuleOptions): Rule {
  return windowRule('fixed-window', FIXED_WINDOW_CODE, options, fixedWindowLogic)
}

function fixedWindowLogic(limit: number, windowMs: number): AlgorithmLogic<FixedWindowState> {
  const windowEnd = (state: FixedWindowState, now: number) => (state.win + 1) * windowMs - now
  return {
    create: () => ({ win: Number.NEGATIVE_INFINITY, count: 0 }),
    advance(state, now) {
      const win = Math.floor(now / windowMs)
      if (state.win !== win) {
        state.win = win
        state.count = 0
      }
    },
    fits: (state, _now, cost) => state.count + cost <= limit,
    consume(state, _now, cost) {
      state.count += cost
    },
    refund(state, _now, cost, at) {
      if (Math.floor(at / windowMs) === state.win) state.count = Math.max(0, state.count - cost)
    },
    report(state, now, pending, deniedCost) {
      const count = state.count + pending
      const denied = deniedCost > 0 && count + deniedCost > limit
      return {
        remaining: Math.max(0, limit - count),
        reset: count > 0 ? windowEnd(state, now) : 0,
        // The next window starts empty, and a validated cost never exceeds the limit.
        retryAfter: denied ? windowEnd(state, now) : 0,
      }
    },
    ttl: (state, now) => (state.count > 0 ? windowEnd(state, now) : 0),
  }
}

/** @internal Lua twin of `fixedWindowLogic`. Key: a string `"<window index>:<count>"` with its TTL. */
export const FIXED_WINDOW_LUA = `
A[${FIXED_WINDOW_CODE}] = {
  load = function(key, limit, window, _, now)
    local st = { key = key, limit = limit, window = window, now = now, win = math.floor(now / window), count = 0 }
    local raw = redis.call('GET', key)
    if raw then
      local win, count = string.match(raw, '^(%-?%d+):(%d+)$')
      if win and tonumber(win) == st.win then st.count = tonumber(count) end
    end
    return st
  end,
  fits = function(st, cost) return st.count + cost <= st.limit end,
  consume = function(st, cost) st.count = st.count + cost end,
  refund = function(st, cost, at)
    if math.floor(at / st.window) == st.win then st.count = math.max(0, st.count - cost) end
  end,
  ttl = function(st)
    if st.count > 0 then return (st.win + 1) * st.window - st.now end
    return 0
  end,
  write = function(st, ttl) redis.call('SET', st.key, num(st.win) .. ':' .. num(st.count), 'PX', num(ttl)) end,
  report = function(st, pending, denied_cost)
    local count = st.count + pending
    local window_end = (st.win + 1) * st.window - st.now
    local reset, retry = 0, 0
    if count > 0 then reset = window_end end
    if denied_cost > 0 and count + denied_cost > st.limit then retry = window_end end
    return math.max(0, st.limit - count), reset, retry
  end,
}
`
