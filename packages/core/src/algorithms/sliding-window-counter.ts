import { windowRule } from './rule.js'
import type { AlgorithmDefinition, AlgorithmLogic, Rule, WindowRuleOptions } from './types.js'

interface SlidingWindowCounterState {
  /** Index of the current fixed window: floor(now / window). Never goes back, even when the clock does. */
  win: number
  curr: number
  prev: number
}

const CODE = 3

/**
 * Sliding window counter (the default): counters for the current and previous fixed windows, and the
 * estimate `prev × (1 − elapsed/window) + curr`. O(1) memory, no boundary burst.
 *
 * NOTE: the decision is made in integers, `prev × (W − elapsed) + (curr + cost) × W <= limit × W`, so the
 * estimate plus the request never exceeds the limit (the reference articles' `floor(estimate) < limit` admits one more).
 * Trade-off: it assumes the previous window's requests were spread evenly; traffic front-loaded in the
 * previous window is over-counted (denies early), back-loaded is under-counted (admits more than an exact log
 * would, bounded by the previous window's count × the elapsed fraction).
 * @example slidingWindowCounter({ limit: 100, window: '1m' })
 */
export function slidingWindowCounter(options: WindowRuleOptions): Rule {
  return windowRule('sliding-window-counter', CODE, options, slidingWindowCounterLogic)
}

function slidingWindowCounterLogic(
  limit: number,
  windowMs: number,
): AlgorithmLogic<SlidingWindowCounterState> {
  const elapsedOf = (state: SlidingWindowCounterState, now: number) => now - state.win * windowMs
  const weight = (state: SlidingWindowCounterState, now: number) =>
    state.prev * (windowMs - elapsedOf(state, now))

  /** Smallest wait after which `cost` fits, given that it does not fit now. */
  function retryAfter(state: SlidingWindowCounterState, now: number, cost: number): number {
    const untilNextWindow = windowMs - elapsedOf(state, now)
    const budget = (limit - state.curr - cost) * windowMs
    if (budget >= 0 && state.prev > 0) {
      // Within this window: prev × (untilNextWindow − d) <= budget.
      const wait = untilNextWindow - Math.floor(budget / state.prev)
      if (wait < untilNextWindow) return wait
    }
    // In the next window `curr` becomes `prev`: curr × (W − e) + cost × W <= limit × W.
    const intoNext =
      state.curr === 0 ? 0 : Math.max(0, windowMs - Math.floor(((limit - cost) * windowMs) / state.curr))
    return untilNextWindow + intoNext
  }

  return {
    create: () => ({ win: Number.NEGATIVE_INFINITY, curr: 0, prev: 0 }),
    advance(state, now) {
      // NOTE: only forward. After a clock steps back across a boundary, `now` lies before the current window:
      // the elapsed time is negative and the previous window weighs a little more, never less.
      const win = Math.floor(now / windowMs)
      if (win <= state.win) return
      state.prev = state.win === win - 1 ? state.curr : 0
      state.curr = 0
      state.win = win
    },
    fits: (state, now, cost) => weight(state, now) + (state.curr + cost) * windowMs <= limit * windowMs,
    consume(state, _now, cost) {
      state.curr += cost
    },
    refund(state, _now, cost, at) {
      const win = Math.floor(at / windowMs)
      if (win === state.win) state.curr = Math.max(0, state.curr - cost)
      else if (win === state.win - 1) state.prev = Math.max(0, state.prev - cost)
    },
    report(state, now, pending, deniedCost) {
      const curr = state.curr + pending
      const free = Math.floor((limit * windowMs - weight(state, now)) / windowMs)
      const denied = deniedCost > 0 && weight(state, now) + (curr + deniedCost) * windowMs > limit * windowMs
      return {
        remaining: Math.max(0, free - curr),
        reset: resetOf(curr, state.prev, windowMs - elapsedOf(state, now), windowMs),
        retryAfter: denied ? retryAfter(state, now, deniedCost) : 0,
      }
    },
    ttl: (state, now) => resetOf(state.curr, state.prev, windowMs - elapsedOf(state, now), windowMs),
  }
}

/** The whole quota is free once both counters have left the window. */
function resetOf(curr: number, prev: number, untilNextWindow: number, windowMs: number): number {
  if (curr > 0) return untilNextWindow + windowMs
  return prev > 0 ? untilNextWindow : 0
}

/**
 * Lua twin of `slidingWindowCounterLogic`. Key: a hash `{ w = window index, c = curr, p = prev }`. Another type
 * or content marks the state `broken`: the script deletes the key and starts afresh.
 */
const LUA = `
do
  local function elapsedOf(st) return st.now - st.win * st.window end
  local function weight(st) return st.prev * (st.window - elapsedOf(st)) end
  local function retryAfter(st, cost)
    local W, L = st.window, st.limit
    local untilNextWindow = W - elapsedOf(st)
    local budget = (L - st.curr - cost) * W
    if budget >= 0 and st.prev > 0 then
      local wait = untilNextWindow - math.floor(budget / st.prev)
      if wait < untilNextWindow then return wait end
    end
    local intoNext = 0
    if st.curr > 0 then intoNext = math.max(0, W - math.floor((L - cost) * W / st.curr)) end
    return untilNextWindow + intoNext
  end
  local function resetOf(curr, prev, untilNextWindow, W)
    if curr > 0 then return untilNextWindow + W end
    if prev > 0 then return untilNextWindow end
    return 0
  end
  A[${CODE}] = {
    load = function(key, limit, window, _, now)
      local st = { key = key, limit = limit, window = window, now = now, win = math.floor(now / window), curr = 0, prev = 0 }
      local raw, broken = read('HMGET', key, 'w', 'c', 'p')
      if raw and (raw[1] or raw[2] or raw[3]) then
        local win, curr, prev = tonumber(raw[1]), tonumber(raw[2] or 0), tonumber(raw[3] or 0)
        if not (win and curr and prev) then broken = true
        elseif win >= st.win then st.win, st.curr, st.prev = win, curr, prev
        elseif win == st.win - 1 then st.prev = curr end
      end
      st.broken = broken
      return st
    end,
    fits = function(st, cost)
      return weight(st) + (st.curr + cost) * st.window <= st.limit * st.window
    end,
    consume = function(st, cost) st.curr = st.curr + cost end,
    refund = function(st, cost, at)
      local win = math.floor(at / st.window)
      if win == st.win then st.curr = math.max(0, st.curr - cost)
      elseif win == st.win - 1 then st.prev = math.max(0, st.prev - cost) end
    end,
    report = function(st, pending, denied_cost)
      local W, L = st.window, st.limit
      local curr = st.curr + pending
      local free = math.floor((L * W - weight(st)) / W)
      local retry = 0
      if denied_cost > 0 and weight(st) + (curr + denied_cost) * W > L * W then retry = retryAfter(st, denied_cost) end
      return math.max(0, free - curr), resetOf(curr, st.prev, W - elapsedOf(st), W), retry
    end,
    ttl = function(st) return resetOf(st.curr, st.prev, st.window - elapsedOf(st), st.window) end,
    write = function(st, ttl)
      redis.call('HSET', st.key, 'w', num(st.win), 'c', num(st.curr), 'p', num(st.prev))
      redis.call('PEXPIRE', st.key, num(ttl))
    end,
  }
end
`

/** @internal */
export const SLIDING_WINDOW_COUNTER: AlgorithmDefinition = {
  name: 'sliding-window-counter',
  code: CODE,
  lua: LUA,
  fromLimit: (limit, window) => slidingWindowCounter({ limit, window }),
}
