import { windowRule } from './rule.js'
import type { AlgorithmLogic, LuaTwin, Rule, WindowAlgorithmDefinition, WindowRuleOptions } from './types.js'

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
    // A unit weighs on the next window only: more than one limit owed would be forgotten with it.
    carriedDebt: limit,
    consume(state, _now, cost) {
      state.curr += cost
    },
    refund(state, _now, cost, at) {
      const win = Math.floor(at / windowMs)
      if (win === state.win) state.curr = Math.max(0, state.curr - cost)
      else if (win === state.win - 1) state.prev = Math.max(0, state.prev - cost)
    },
    report(state, now, pending, deniedCost, into, i) {
      const curr = state.curr + pending
      const free = Math.floor((limit * windowMs - weight(state, now)) / windowMs)
      const denied = weight(state, now) + (curr + deniedCost) * windowMs > limit * windowMs
      into.remaining[i] = Math.max(0, free - curr)
      into.reset[i] = resetOf(curr, state.prev, windowMs - elapsedOf(state, now), windowMs)
      into.retryAfter[i] = denied ? retryAfter(state, now, deniedCost) : 0
    },
    ttl: (state, now) => resetOf(state.curr, state.prev, windowMs - elapsedOf(state, now), windowMs),
    // `limit − remaining` unclamped: the estimate, rounded up.
    used: (state, now) => state.curr + Math.ceil(weight(state, now) / windowMs),
  }
}

/** The whole quota is free once both counters have left the window. */
function resetOf(curr: number, prev: number, untilNextWindow: number, windowMs: number): number {
  if (curr > 0) return untilNextWindow + windowMs
  return prev > 0 ? untilNextWindow : 0
}

/**
 * Lua twin of `slidingWindowCounterLogic`. Key: a string of 24 bytes, three little-endian doubles (window index,
 * current count, previous count; `struct.pack('<ddd', …)`), written with `SET … PX`. Packing and unpacking cost
 * a fraction of formatting and parsing decimal text. While the window and its expiry stay the same,
 * a write on server time keeps the key's TTL (`SET … KEEPTTL`): the expiry, the end of the next window, moves once
 * per window.
 * The hash `{ w, c, p }` that earlier builds wrote is read once and replaced by the next write, a read included.
 * Another type or content marks the state `broken`: the script deletes the key and starts afresh.
 */
const LUA: LuaTwin = {
  params: 2,
  state: ['win', 'curr', 'prev', 'elapsed', 'keep', 'broken', 'convert'],
  load: (r) => {
    const [L, W] = r.params
    const [win, curr, prev, elapsed, keep] = ['win', 'curr', 'prev', 'elapsed', 'keep'].map(r.v)
    return `${win}, ${curr}, ${prev}, ${keep} = math.floor(now / ${W}), 0, 0, false
do
  local raw = redis.pcall('GET', ${r.key})
  if raw then
    local w, c, p
    if type(raw) == 'string' then
      if #raw == 24 then w, c, p = struct.unpack('<ddd', raw) end
    else
      raw = redis.pcall('HMGET', ${r.key}, 'w', 'c', 'p')
      if not raw.err then w, c, p = tonumber(raw[1]), tonumber(raw[2] or 0), tonumber(raw[3] or 0) end
      ${r.v('convert')} = true
    end
    if not (w and c and p and w % 1 == 0 and c % 1 == 0 and p % 1 == 0 and c >= 0 and p >= 0) then ${r.v('broken')} = true
    elseif w >= ${win} then ${win}, ${curr}, ${prev}, ${keep} = w, c, p, c > 0 and server and not ${r.v('convert')}
    elseif w == ${win} - 1 then ${prev} = c end
  end
end
${elapsed} = now - ${win} * ${W}
${L} = ${L} * ${W}
`
    // NOTE: from here on the limit is kept multiplied by the window, as every comparison uses it.
  },
  fits: (r, cost) => {
    const [LW, W] = r.params
    return `${r.v('prev')} * (${W} - ${r.v('elapsed')}) + (${r.v('curr')} + ${cost}) * ${W} <= ${LW}`
  },
  consume: (r, cost) => `${r.v('curr')} = ${r.v('curr')} + ${cost}
`,
  refund: (r, cost, at) => {
    const [win, curr, prev] = ['win', 'curr', 'prev'].map(r.v)
    return `do
  local w = math.floor(${at} / ${r.params[1]})
  if w == ${win} then ${curr} = math.max(0, ${curr} - ${cost})
  elseif w == ${win} - 1 then ${prev} = math.max(0, ${prev} - ${cost}) end
end
`
  },
  report: (r, pending, denied) => {
    const [LW, W] = r.params
    const [curr, prev, elapsed] = ['curr', 'prev', 'elapsed'].map(r.v)
    return `do
  local c, untilNext = ${curr} + ${pending}, ${W} - ${elapsed}
  local weight = ${prev} * untilNext
  remaining = math.max(0, math.floor((${LW} - weight) / ${W}) - c)
  if c > 0 then reset = untilNext + ${W} elseif ${prev} > 0 then reset = untilNext else reset = 0 end
  retry = 0
  if weight + (c + ${denied}) * ${W} > ${LW} then
    local budget = ${LW} - (${curr} + ${denied}) * ${W}
    if budget >= 0 and ${prev} > 0 then retry = untilNext - math.floor(budget / ${prev}) end
    if retry <= 0 or retry >= untilNext then
      retry = untilNext
      if ${curr} > 0 then retry = retry + math.max(0, ${W} - math.floor((${LW} - ${denied} * ${W}) / ${curr})) end
    end
  end
end
`
  },
  persist: (r, keepTtl) => {
    const [win, curr, prev, elapsed, keep] = ['win', 'curr', 'prev', 'elapsed', 'keep'].map(r.v)
    const W = r.params[1]
    const value = `struct.pack('<ddd', ${win}, ${curr}, ${prev})`
    return `if ${curr} > 0 then
  ${keepTtl ? `if ${keep} then redis.call('SET', ${r.key}, ${value}, 'KEEPTTL') else ` : ''}redis.call('SET', ${r.key}, ${value}, 'PX', 2 * ${W} - ${elapsed})${keepTtl ? ' end' : ''}
elseif ${prev} > 0 then redis.call('SET', ${r.key}, ${value}, 'PX', ${W} - ${elapsed})
else redis.call('DEL', ${r.key}) end
`
  },
  used: (r) => {
    const W = r.params[1]
    return `${r.v('curr')} + math.ceil(${r.v('prev')} * (${W} - ${r.v('elapsed')}) / ${W})`
  },
  limit: (r) => `${r.params[0]} / ${r.params[1]}`,
  carriedDebt: (r) => `${r.params[0]} / ${r.params[1]}`,
}

/** @internal */
export const SLIDING_WINDOW_COUNTER: WindowAlgorithmDefinition = {
  name: 'sliding-window-counter',
  code: CODE,
  lua: LUA,
  fromLimit: (limit, window) => slidingWindowCounter({ limit, window }),
}
