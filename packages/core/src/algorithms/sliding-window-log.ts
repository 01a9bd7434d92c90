import { windowRule } from './rule.js'
import type {
  AlgorithmLogic,
  LuaRule,
  LuaTwin,
  Rule,
  WindowAlgorithmDefinition,
  WindowRuleOptions,
} from './types.js'

/**
 * Timestamps of admitted requests, oldest first, in a ring buffer that grows up to `limit` entries (further with
 * reserved slots: at most `limit` per window up to the latest slot; up to 2 × `limit` with a settle's debt).
 */
interface SlidingWindowLogState {
  times: Float64Array
  head: number
  size: number
}

const CODE = 2
const INITIAL_CAPACITY = 8
/**
 * The largest cost of one request under the log. The log stores one entry per unit of cost, so a decision's
 * work grows with its cost: a cost of 100,000 held Redis for 0.3 s. Weighted requests belong in the counter
 * or the token bucket, whose work does not depend on the cost.
 */
export const LOG_MAX_COST = 1_000
/**
 * A charge past the limit (`Store.charge`: a settle's debt) keeps at most this many times `limit` entries, the
 * newest, dropping the oldest. A charge owes one limit at most (`carriedDebt`), so it only bites where entries
 * counted under a higher limit (lowered by an override) are more. Every decision stays exact: whether a request
 * fits, its wait, `remaining` and `reset` depend only on the newest `limit` + cost entries (the oldest leave the
 * window first, and a cost never exceeds the limit), and a unit counts for one window whatever its number. It
 * bounds the log's memory and a charge's work by the limit.
 */
const DEBT_CAP = 2

/**
 * Sliding window log: the timestamps of admitted requests (never of denied ones, so a flood cannot grow
 * memory). Exact: at most `limit` in every window `(now − window, now]`.
 *
 * Trade-off: memory grows with the limit (8 bytes per entry in memory, about 60 in Redis), and work with the
 * cost: a request may cost at most 1,000 (`LOG_MAX_COST`). Use it for low, sensitive limits such as logins.
 * @example slidingWindowLog({ limit: 5, window: '1m' })
 */
export function slidingWindowLog(options: WindowRuleOptions): Rule {
  return windowRule('sliding-window-log', CODE, options, slidingWindowLogLogic, LOG_MAX_COST)
}

function at(state: SlidingWindowLogState, index: number): number {
  return state.times[(state.head + index) % state.times.length]!
}

function push(state: SlidingWindowLogState, time: number, limit: number): void {
  if (state.size === state.times.length) {
    // At `limit` without reservations; reserved slots, later than now, may hold more.
    const capacity = Math.max(INITIAL_CAPACITY, state.times.length * 2)
    const grown = new Float64Array(state.size < limit ? Math.min(limit, capacity) : capacity)
    for (let i = 0; i < state.size; i++) grown[i] = at(state, i)
    state.times = grown
    state.head = 0
  }
  state.times[(state.head + state.size) % state.times.length] = time
  state.size++
}

/** Removes the `cost` newest entries that `matches` accepts, keeping the others in order. */
function removeNewest(
  state: SlidingWindowLogState,
  cost: number,
  limit: number,
  matches: (entry: number) => boolean,
): void {
  const kept: number[] = []
  let left = cost
  for (let i = state.size - 1; i >= 0; i--) {
    const entry = at(state, i)
    if (left > 0 && matches(entry)) left--
    else kept.push(entry)
  }
  state.head = 0
  state.size = 0
  for (let i = kept.length - 1; i >= 0; i--) push(state, kept[i]!, limit)
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
    // An entry counts for one window: more than one limit owed would leave with it.
    carriedDebt: limit,
    consume(state, now, cost) {
      // A clock that steps back must not unsort the log: such a request counts as arriving with the newest.
      const time = state.size > 0 ? Math.max(now, newest(state)) : now
      const kept = Math.min(cost, DEBT_CAP * limit)
      for (let i = 0; i < kept; i++) push(state, time, limit)
      // NOTE: a charge past the limit (a settle's debt) keeps the newest 2 × limit entries (`DEBT_CAP`).
      while (state.size > DEBT_CAP * limit) {
        state.head = (state.head + 1) % state.times.length
        state.size--
      }
    },
    // Once the `excess` oldest entries have left; and never before the newest entry (a reserved slot), so that
    // slots are reserved first come, first served and the log stays sorted.
    wait(state, now, cost) {
      if (state.size === 0) return 0
      const excess = state.size + cost - limit
      // A cost above the limit (a lowered override's) never fits: no slot.
      if (excess > state.size) return Number.POSITIVE_INFINITY
      const free = excess > 0 ? at(state, excess - 1) + windowMs : now
      return Math.max(0, free - now, newest(state) - now)
    },
    // The entries go in at `at`: at most `limit` in every window `(t − window, t]`, counted at their slots.
    reserve(state, _now, time, cost) {
      for (let i = 0; i < cost; i++) push(state, time, limit)
    },
    refund(state, _now, cost, time) {
      removeNewest(state, cost, limit, (entry) => entry === time)
    },
    // The newest entries admitted by now; never a reserved slot (later than now), which a waiter still holds.
    give(state, now, cost) {
      removeNewest(state, cost, limit, (entry) => entry <= now)
    },
    report(state, now, pending, deniedCost, into, i) {
      const count = state.size + pending
      const excess = count + deniedCost - limit
      into.remaining[i] = Math.max(0, limit - count)
      into.reset[i] = count === 0 ? 0 : pending > 0 ? windowMs : newest(state) + windowMs - now
      // The request passes once the `excess` oldest entries have left (pending ones, at `now`, last).
      into.retryAfter[i] =
        excess > 0 ? (excess > state.size ? windowMs : at(state, excess - 1) + windowMs - now) : 0
    },
    ttl: (state, now) => (state.size > 0 ? newest(state) + windowMs - now : 0),
    used: (state) => state.size,
  }
}

/**
 * Lua twin of `slidingWindowLogLogic`. Key: a sorted set scored by timestamp (ms); members are `<time>:<n>`,
 * made unique per key, one per unit of cost. Another type marks the state `broken`: the script deletes the key
 * and starts afresh.
 */
const LUA: LuaTwin = {
  params: 2,
  state: ['size', 'broken'],
  load: (r) => `${r.v('size')} = 0
if type(redis.pcall('ZREMRANGEBYSCORE', ${r.key}, '-inf', num(now - ${r.params[1]}))) == 'table' then ${r.v('broken')} = true
else ${r.v('size')} = redis.call('ZCARD', ${r.key}) end
`,
  fits: (r, cost) => `${r.v('size')} + ${cost} <= ${r.params[0]}`,
  consume: (r, cost) => logConsume(r, cost, 'now', true),
  wait: (r, cost) => {
    const [L, W] = r.params
    const size = r.v('size')
    return `if ${size} > 0 then
  local excess = ${size} + ${cost} - ${L}
  w = math.max(w, tonumber(redis.call('ZRANGE', ${r.key}, -1, -1, 'WITHSCORES')[2]) - now)
  if excess > ${size} then w = math.huge
  elseif excess > 0 then
    w = math.max(w, tonumber(redis.call('ZRANGE', ${r.key}, excess - 1, excess - 1, 'WITHSCORES')[2]) + ${W} - now)
  end
end
`
  },
  // The wait is never before the newest entry: consuming at `at` puts the entries at `at` itself.
  reserve: (r, cost, at) => logConsume(r, cost, at, false),
  refund: (r, cost, at) => `do
  local members = redis.call('ZRANGEBYSCORE', ${r.key}, num(${at}), num(${at}), 'LIMIT', 0, ${cost})
  if #members > 0 then
    redis.call('ZREM', ${r.key}, unpack(members))
    ${r.v('size')} = ${r.v('size')} - #members
  end
end
`,
  // The newest entries admitted by now, whatever their times; never a reserved slot (later than now). ZREM in
  // batches: Lua's `unpack` has a limit, and `cost` is not capped for a give.
  give: (r, cost) => `do
  local members = redis.call('ZREVRANGEBYSCORE', ${r.key}, num(now), '-inf', 'LIMIT', 0, ${cost})
  for i = 1, #members, 256 do
    redis.call('ZREM', ${r.key}, unpack(members, i, math.min(i + 255, #members)))
  end
  ${r.v('size')} = ${r.v('size')} - #members
end
`,
  report: (r, pending, denied) => {
    const [L, W] = r.params
    const size = r.v('size')
    return `do
  local count, excess = ${size} + ${pending}, ${size} + ${denied} - ${L}
  remaining, reset, retry = math.max(0, ${L} - count), 0, 0
  if count > 0 then
    if ${pending} > 0 then reset = ${W}
    else reset = tonumber(redis.call('ZRANGE', ${r.key}, -1, -1, 'WITHSCORES')[2]) + ${W} - now end
  end
  -- A cost above the limit (a lowered override's) outlasts every entry: a window, as in JavaScript.
  if excess > ${size} then retry = ${W}
  elseif excess > 0 then
    retry = tonumber(redis.call('ZRANGE', ${r.key}, excess - 1, excess - 1, 'WITHSCORES')[2]) + ${W} - now
  end
end
`
  },
  persist: (r) => `if ${r.v('size')} > 0 then
  local newest = tonumber(redis.call('ZRANGE', ${r.key}, -1, -1, 'WITHSCORES')[2])
  redis.call('PEXPIRE', ${r.key}, num(newest + ${r.params[1]} - now))
else redis.call('DEL', ${r.key}) end
`,
  used: (r) => r.v('size'),
  limit: (r) => r.params[0]!,
  carriedDebt: (r) => r.params[0]!,
}

/**
 * The log's consume at `time` (a Lua expression): entries at `max(time, newest)`. `capped`: a charge's, which keeps
 * the newest `DEBT_CAP` × limit entries (see `DEBT_CAP`).
 */
function logConsume(r: LuaRule, cost: string, time: string, capped: boolean): string {
  const size = r.v('size')
  const cap = `${DEBT_CAP} * ${r.params[0]}`
  const count = capped ? `math.min(${cost}, ${cap})` : cost
  const trim = capped
    ? `  if ${size} > ${cap} then
    redis.call('ZREMRANGEBYRANK', ${r.key}, 0, ${size} - ${cap} - 1)
    ${size} = ${cap}
  end
`
    : ''
  return `do
  local time = ${time}
  if ${size} > 0 then time = math.max(time, tonumber(redis.call('ZRANGE', ${r.key}, -1, -1, 'WITHSCORES')[2])) end
  local t = num(time)
  -- Members t:1, t:2, ... in batches of ZADD NX: a number freed by a refund is taken again, a taken one
  -- is skipped (NX adds nothing for it) and the batch continues past it.
  local n, left = redis.call('ZCOUNT', ${r.key}, t, t), ${count}
  while left > 0 do
    local args = {}
    for _ = 1, math.min(left, 256) do
      n = n + 1
      args[#args + 1] = t
      args[#args + 1] = t .. ':' .. n
    end
    left = left - redis.call('ZADD', ${r.key}, 'NX', unpack(args))
  end
  ${size} = ${size} + ${count}
${trim}end
`
}

/** @internal */
export const SLIDING_WINDOW_LOG: WindowAlgorithmDefinition = {
  name: 'sliding-window-log',
  code: CODE,
  lua: LUA,
  fromLimit: (limit, window) => slidingWindowLog({ limit, window }),
}
