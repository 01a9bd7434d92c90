import { windowRule } from './rule.js'
import type { AlgorithmLogic, Rule, WindowRuleOptions } from './types.js'

/** Timestamps of admitted requests, oldest first, in a ring buffer that grows up to `limit` entries. */
interface SlidingWindowLogState {
  times: Float64Array
  head: number
  size: number
}

/** @internal */
export const SLIDING_WINDOW_LOG_CODE = 2
const INITIAL_CAPACITY = 8

/**
 * Sliding window log: the timestamps of admitted requests (never of denied ones, so a flood cannot grow
 * memory). Exact: at most `limit` in every window `(now − window, now]`.
 *
 * Trade-off: memory grows with the limit (8 bytes per entry in memory, about 60 in Redis). Use it for low,
 * sensitive limits such as logins.
 * @example slidingWindowLog({ limit: 5, window: '1m' })
 */
export function slidingWindowLog(options: WindowRuleOptions): Rule {
  return windowRule('sliding-window-log', SLIDING_WINDOW_LOG_CODE, options, slidingWindowLogLogic)
}

function at(state: SlidingWindowLogState, index: number): number {
  return state.times[(state.head + index) % state.times.length]!
}

function push(state: SlidingWindowLogState, time: number, limit: number): void {
  if (state.size === state.times.length) {
    const grown = new Float64Array(Math.min(limit, Math.max(INITIAL_CAPACITY, state.times.length * 2)))
    for (let i = 0; i < state.size; i++) grown[i] = at(state, i)
    state.times = grown
    state.head = 0
  }
  state.times[(state.head + state.size) % state.times.length] = time
  state.size++
}

function slidingWindowLogLogic(limit: number, windowMs: number): AlgorithmLogic<SlidingWindowLogState> {
  const newest = (state: SlidingWindowLogState) => at(state, state.size - 1)
  return {
    create: () => ({ times: new Float64Array(Math.min(limit, INITIAL_CAPACITY)), head: 0, size: 0 }),
    advance(state, now) {
      // NOTE: half-open window (now − W, now]: an entry exactly W old has left.
      const cutoff = now - windowMs
      while (state.size > 0 && state.times[state.head]! <= cutoff) {
        state.head = (state.head + 1) % state.times.length
        state.size--
      }
    },
    fits: (state, _now, cost) => state.size + cost <= limit,
    consume(state, now, cost) {
      // A clock that steps back must not unsort the log: such a request counts as arriving with the newest.
      const time = state.size > 0 ? Math.max(now, newest(state)) : now
      for (let i = 0; i < cost; i++) push(state, time, limit)
    },
    refund(state, _now, cost, time) {
      const kept: number[] = []
      let left = cost
      for (let i = state.size - 1; i >= 0; i--) {
        const entry = at(state, i)
        if (left > 0 && entry === time) left--
        else kept.push(entry)
      }
      state.head = 0
      state.size = 0
      for (let i = kept.length - 1; i >= 0; i--) push(state, kept[i]!, limit)
    },
    report(state, now, pending, deniedCost) {
      const count = state.size + pending
      const excess = state.size + deniedCost - limit
      return {
        remaining: Math.max(0, limit - count),
        reset: count === 0 ? 0 : pending > 0 ? windowMs : newest(state) + windowMs - now,
        // The request passes once the `excess` oldest entries have left.
        retryAfter: deniedCost > 0 && excess > 0 ? at(state, excess - 1) + windowMs - now : 0,
      }
    },
    ttl: (state, now) => (state.size > 0 ? newest(state) + windowMs - now : 0),
  }
}

/**
 * @internal Lua twin of `slidingWindowLogLogic`. Key: a sorted set scored by timestamp (ms); members are
 * `<time>:<n>`, made unique per key, one per unit of cost.
 */
export const SLIDING_WINDOW_LOG_LUA = `
A[${SLIDING_WINDOW_LOG_CODE}] = {
  load = function(key, limit, window, _, now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', num(now - window))
    return { key = key, limit = limit, window = window, now = now, size = redis.call('ZCARD', key), added = 0 }
  end,
  fits = function(st, cost) return st.size + cost <= st.limit end,
  consume = function(st, cost)
    local time = st.now
    if st.size > 0 then
      local newest = redis.call('ZRANGE', st.key, -1, -1, 'WITHSCORES')
      time = math.max(time, tonumber(newest[2]))
    end
    local n = redis.call('ZCOUNT', st.key, num(time), num(time))
    for _ = 1, cost do
      n = n + 1
      while redis.call('ZSCORE', st.key, num(time) .. ':' .. n) do n = n + 1 end
      redis.call('ZADD', st.key, num(time), num(time) .. ':' .. n)
    end
    st.size = st.size + cost
  end,
  refund = function(st, cost, at)
    local members = redis.call('ZRANGEBYSCORE', st.key, num(at), num(at), 'LIMIT', 0, cost)
    if #members > 0 then
      redis.call('ZREM', st.key, unpack(members))
      st.size = st.size - #members
    end
  end,
  newest = function(st)
    local newest = redis.call('ZRANGE', st.key, -1, -1, 'WITHSCORES')
    return tonumber(newest[2])
  end,
  ttl = function(st)
    if st.size > 0 then return A[${SLIDING_WINDOW_LOG_CODE}].newest(st) + st.window - st.now end
    return 0
  end,
  write = function(st, ttl) redis.call('PEXPIRE', st.key, num(ttl)) end,
  report = function(st, pending, denied_cost)
    local count = st.size + pending
    local reset, retry = 0, 0
    if count > 0 then
      if pending > 0 then reset = st.window else reset = A[${SLIDING_WINDOW_LOG_CODE}].newest(st) + st.window - st.now end
    end
    local excess = st.size + denied_cost - st.limit
    if denied_cost > 0 and excess > 0 then
      local oldest = redis.call('ZRANGE', st.key, excess - 1, excess - 1, 'WITHSCORES')
      retry = tonumber(oldest[2]) + st.window - st.now
    end
    return math.max(0, st.limit - count), reset, retry
  end,
}
`
