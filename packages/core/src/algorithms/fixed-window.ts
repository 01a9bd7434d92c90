import { windowRule } from './rule.js'
import type { AlgorithmDefinition, AlgorithmLogic, Rule, WindowRuleOptions } from './types.js'

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
  return {
    create: () => ({ win: Number.NEGATIVE_INFINITY, count: 0 }),
    advance(state, now) {
      // NOTE: only forward. A clock stepping back a few ms across a boundary keeps the newer window and its
      // count; resetting to the older window would start a third count.
      const win = Math.floor(now / windowMs)
      if (win > state.win) {
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

/**
 * Lua twin of `fixedWindowLogic`. Key: a string `"<window index>:<count>"` with its TTL. Another type or
 * content marks the state `broken`: the script deletes the key and starts afresh.
 */
const LUA = `
do
  local function windowEnd(st) return (st.win + 1) * st.window - st.now end
  A[${CODE}] = {
    load = function(key, limit, window, _, now)
      local st = { key = key, limit = limit, window = window, now = now, win = math.floor(now / window), count = 0 }
      local raw, broken = read('GET', key)
      if raw then
        local win, count = string.match(raw, '^(%-?%d+):(%d+)$')
        if not win then broken = true
        elseif tonumber(win) >= st.win then st.win, st.count = tonumber(win), tonumber(count) end
      end
      st.broken = broken
      return st
    end,
    fits = function(st, cost) return st.count + cost <= st.limit end,
    consume = function(st, cost) st.count = st.count + cost end,
    refund = function(st, cost, at)
      if math.floor(at / st.window) == st.win then st.count = math.max(0, st.count - cost) end
    end,
    report = function(st, pending, denied_cost)
      local count = st.count + pending
      local reset, retry = 0, 0
      if count > 0 then reset = windowEnd(st) end
      if denied_cost > 0 and count + denied_cost > st.limit then retry = windowEnd(st) end
      return math.max(0, st.limit - count), reset, retry
    end,
    ttl = function(st)
      if st.count > 0 then return windowEnd(st) end
      return 0
    end,
    write = function(st, ttl) redis.call('SET', st.key, num(st.win) .. ':' .. num(st.count), 'PX', num(ttl)) end,
  }
end
`

/** @internal */
export const FIXED_WINDOW: AlgorithmDefinition = {
  name: 'fixed-window',
  code: CODE,
  lua: LUA,
  fromLimit: (limit, window) => fixedWindow({ limit, window }),
}
