import { createHash } from 'node:crypto'
import { ALGORITHMS_BY_CODE } from '../algorithms/index.js'
import { PENALTY_LUA } from '../penalty.js'

/** @internal Modes of the decision script. */
export const MODE = { consume: 0, peek: 1, refund: 2, charge: 3 } as const

/**
 * @internal The script behind RedisStore calls: all rules of a request, whatever their algorithms, decided
 * and written atomically in one round trip. It holds the Lua of the algorithms it is built with only.
 * NOTE: Lua defines every function of the script on each call; a script with only the algorithms a rule set
 * uses ran 1.35× as many decisions per second as one with all four (redis-benchmark, counter rules).
 *
 * KEYS[i]  state key of rule i; all keys share one hash tag, so one Cluster slot
 * ARGV[1]  mode: 0 consume, 1 peek, 2 refund, 3 charge (settle: consume as much of `cost` as every rule still
 *          admits, never more; the reply's first number is the units charged instead of `allowed`)
 * ARGV[2]  now in epoch ms, or -1 to read the server's TIME
 * ARGV[3]  cost, whole units
 * ARGV[4]  refund: the `at` (epoch ms) of the decision being refunded; otherwise 0
 * ARGV[4i+1 .. 4i+4]  rule i: algorithm code and its three numeric parameters
 *
 * With a penalty (a script built with `penalty`): the last key is the penalty state (same hash tag), and
 * ARGV[4n+5 .. 4n+9] hold after, within, block, factor, maxBlock.
 *
 * Returns integers only: { allowed (1/0), now (ms), then per rule: remaining, reset (ms), retryAfter (ms),
 * then `repaired`, then with a penalty how long the key stays blocked (ms) }. A refund returns
 * { 1, now, repaired }.
 * `repaired` is a bit mask, bit i − 1 for rule i: that rule's key held a state the algorithm cannot read
 * (another Redis type, unparsable content) and was deleted and decided from a fresh state, or it had no TTL
 * and got one. The store reports it (RedisStore: `Decision.notices`); the decision stands.
 * NOTE: numbers go to redis.call through num(): Lua's default number formatting keeps 14 digits only.
 */
export function decisionScript(codes: readonly number[], penalty = false): string {
  return `
local function num(n) return string.format('%.0f', n) end
-- A read that tolerates a key of another type: returns the reply and whether the key is broken.
local function read(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then return nil, true end
  return reply, false
end
local A = {}
${codes.map((code) => ALGORITHMS_BY_CODE.get(code)!.lua).join('')}${penalty ? PENALTY_LUA : ''}
local function persist(algo, st)
  local ttl = algo.ttl(st)
  if ttl > 0 then algo.write(st, ttl) else redis.call('DEL', st.key) end
end

local mode, now, cost, at = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if now < 0 then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local n = #KEYS${penalty ? ' - 1' : ''}
local algos, states, allowed, repaired = {}, {}, true, 0
${
  penalty
    ? `local P, pen, blocked = nil, nil, 0
do
  local base = 4 * n + 4
  P = { after = tonumber(ARGV[base + 1]), within = tonumber(ARGV[base + 2]), block = tonumber(ARGV[base + 3]),
    factor = tonumber(ARGV[base + 4]), maxBlock = tonumber(ARGV[base + 5]) }
  pen = loadPenalty(KEYS[n + 1])
  if pen.broken then
    redis.call('DEL', pen.key)
    repaired = repaired + 2 ^ n
  end
  -- A blocked key is denied whatever its rules say, and its denials are not counted again.
  blocked = math.max(0, pen['until'] - now)
  if blocked > 0 then allowed = false end
end
`
    : ''
}for i = 1, n do
  local base = 4 * i
  local algo = A[tonumber(ARGV[base + 1])]
  algos[i] = algo
  states[i] = algo.load(KEYS[i], tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4]), now)
  if states[i].broken then
    -- Unreadable: forget it, so that the key is rewritten from the fresh state load returned.
    redis.call('DEL', KEYS[i])
    repaired = repaired + 2 ^ (i - 1)
  end
  if not algos[i].fits(states[i], cost) then allowed = false end
end

if mode == ${MODE.refund} then
  for i = 1, n do
    algos[i].refund(states[i], cost, at)
    persist(algos[i], states[i])
  end
  return { 1, now, repaired }
end

if mode == ${MODE.charge} then
  -- The largest k <= cost that every rule admits ("fits" only gets harder as k grows): a settled cost is
  -- charged up to the quota left, never below zero.
  local k = cost
  for i = 1, n do
    if not algos[i].fits(states[i], k) then
      local lo, hi = 0, k - 1
      while lo < hi do
        local mid = math.ceil((lo + hi) / 2)
        if algos[i].fits(states[i], mid) then lo = mid else hi = mid - 1 end
      end
      k = lo
    end
  end
  allowed, cost = true, k
end

local out = { allowed and 1 or 0, now }
for i = 1, n do
  local algo, st = algos[i], states[i]
  local pending, denied_cost = 0, cost
  if allowed then denied_cost = 0 end
  if mode == ${MODE.charge} then denied_cost = 0 end
  if allowed and (mode == ${MODE.consume} or mode == ${MODE.charge}) then
    algo.consume(st, cost)
    persist(algo, st)
  else
    if allowed then pending = cost end
    -- Repair a key found without a TTL (written by hand, or by an old version): it must not live forever.
    if redis.call('PTTL', st.key) == -1 then
      persist(algo, st)
      if not st.broken then repaired = repaired + 2 ^ (i - 1) end
    end
  end
  local remaining, reset, retry = algo.report(st, pending, denied_cost)
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = retry
end
${
  penalty
    ? `if not allowed and blocked == 0 and mode == ${MODE.consume} then
  blocked = recordDenial(P, pen, now)
  persistPenalty(P, pen, now)
elseif pen.loaded and not pen.broken and redis.call('PTTL', pen.key) == -1 then
  persistPenalty(P, pen, now)
end
`
    : ''
}if mode == ${MODE.charge} then out[1] = cost end
out[#out + 1] = repaired
${penalty ? 'out[#out + 1] = blocked\n' : ''}return out
`
}

export interface Script {
  readonly lua: string
  readonly sha1: string
}

const scripts = new Map<string, Script>()

/** The script for a set of algorithm codes (and a penalty, or none), built once per distinct set. */
export function scriptFor(codes: Iterable<number>, penalty = false): Script {
  const sorted = [...new Set(codes)].sort((a, b) => a - b)
  const key = `${sorted.join(',')}${penalty ? '+p' : ''}`
  let script = scripts.get(key)
  if (script === undefined) {
    const lua = decisionScript(sorted, penalty)
    script = Object.freeze({ lua, sha1: createHash('sha1').update(lua).digest('hex') })
    scripts.set(key, script)
  }
  return script
}
