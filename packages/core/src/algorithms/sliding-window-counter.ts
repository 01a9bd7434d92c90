import { windowRule } from './rule.js'
import type { AlgorithmLogic, Rule, WindowRuleOptions } from './types.js'

interface SlidingWindowCounterState {
  /** Index of the current fixed window: floor(now / window). */
  win: number
  curr: number
  prev: number
}

/** @internal */
export const SLIDING_WINDOW_COUNTER_CODE = 3

/**
 * Sliding window counter (the default): counters for the current and previous fixed windows, and the
 * estimate `prev × (1 − elapsed/window) + curr`. O(1) memory, no boundary burst.
 *
 * NOTE: the decision is made in integers, `prev × (W − elapsed) + (curr + cost) × W <= limit × W`, so the
 * estimate plus the request never exceeds the limit (the seeds' `floor(estimate) < limit` admits one more).
 * Trade-off: it assumes the previous window's requests were spread evenly; traffic front-loaded in the
 * previous window is over-counted (denies early), back-loaded is under-counted (admits more than an exact log
 * would, bounded by the previous window's count × the elapsed fraction).
 * @example slidingWindowCounter({ limit: 100, window: '1m' })
 */
export function slidingWindowCounter(options: WindowRuleOptions): Rule {
  return windowRule('sliding-window-counter', SLIDING_WINDOW_COUNTER_CODE, options, slidingWindowCounterLogic)
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
      const win = Math.floor(now / windowMs)
      if (state.win === win) return
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

/** @internal Lua twin of `slidingWindowCounterLogic`. Key: a hash `{ w = window index, c = curr, p = prev }`. */
export const SLIDING_WINDOW_COUNTER_LUA = `
A[${SLIDING_WINDOW_COUNTER_CODE}] = {
  load = function(key, limit, window, _, now)
    local st = { key = key, limit = limit, window = window, now = now, win = math.floor(now / window), curr = 0, prev = 0 }
    local raw = redis.call('HMGET', key, 'w', 'c', 'p')
    local win = tonumber(raw[1])
    if win == st.win then
      st.curr, st.prev = tonumber(raw[2]) or 0, tonumber(raw[3]) or 0
    elseif win == st.win - 1 then
      st.prev = tonumber(raw[2]) or 0
    end
    st.elapsed = now - st.win * window
    return st
  end,
  fits = function(st, cost)
    return st.prev * (st.window - st.elapsed) + (st.curr + cost) * st.window <= st.limit * st.window
  end,
  consume = function(st, cost) st.curr = st.curr + cost end,
  refund = function(st, cost, at)
    local win = math.floor(at / st.window)
    if win == st.win then st.curr = math.max(0, st.curr - cost)
    elseif win == st.win - 1 then st.prev = math.max(0, st.prev - cost) end
  end,
  ttl = function(st)
    local until_next = st.window - st.elapsed
    if st.curr > 0 then return until_next + st.window end
    if st.prev > 0 then return until_next end
    return 0
  end,
  write = function(st, ttl)
    redis.call('HSET', st.key, 'w', num(st.win), 'c', num(st.curr), 'p', num(st.prev))
    redis.call('PEXPIRE', st.key, num(ttl))
  end,
  report = function(st, pending, denied_cost)
    local W, L = st.window, st.limit
    local weight = st.prev * (W - st.elapsed)
    local curr = st.curr + pending
    local until_next = W - st.elapsed
    local reset = 0
    if curr > 0 then reset = until_next + W elseif st.prev > 0 then reset = until_next end
    local retry = 0
    if denied_cost > 0 and weight + (curr + denied_cost) * W > L * W then
      local budget = (L - st.curr - denied_cost) * W
      retry = -1
      if budget >= 0 and st.prev > 0 then
        local wait = until_next - math.floor(budget / st.prev)
        if wait < until_next then retry = wait end
      end
      if retry < 0 then
        local into_next = 0
        if st.curr > 0 then into_next = math.max(0, W - math.floor((L - denied_cost) * W / st.curr)) end
        retry = until_next + into_next
      end
    end
    return math.max(0, math.floor((L * W - weight) / W) - curr), reset, retry
  end,
}
`
