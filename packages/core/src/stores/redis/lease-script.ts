import type { LeaseDecision } from '../types.js'
import { type Script, scriptOf } from './script.js'

/** The lease script's modes, its first argument. */
export const LEASE_MODE = { acquire: 0, release: 1 } as const

/**
 * The lease logic, as a Lua function of one lease key and its arguments: mode, now (ms, or -1 for the server's
 * TIME), lease id, limit, lease ms. Acquire returns { allowed, in flight, ms until the earliest lease expires }
 * (an id held already is renewed, counted once); release returns { 1, 0, 0 }.
 */
const LEASE_FUNCTION = `
local function lease(key, mode, now, id, limit, leaseMs)
  if mode == ${LEASE_MODE.release} then
    redis.call('ZREM', key, id)
    return { 1, 0, 0 }
  end
  if now < 0 then
    local time = redis.call('TIME')
    now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now))
  local n = redis.call('ZCARD', key)
  -- An id held already is renewed: it does not count against the limit it holds a place in.
  local held = redis.call('ZSCORE', key, id) and 1 or 0
  local allowed = 0
  if n - held < limit then
    redis.call('ZADD', key, string.format('%.0f', now + leaseMs), id)
    n = n - held + 1
    allowed = 1
  end
  local next = 0
  if n > 0 then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    next = tonumber(first[2]) - now
    -- The set lives as long as its latest lease.
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', key, string.format('%.0f', math.max(1, tonumber(last[2]) - now)))
  end
  return { allowed, n, next }
end
`
/** The lease script: KEYS[1] the sorted set; ARGV the five arguments of `lease`. */
const LEASE_LUA = `${LEASE_FUNCTION}
return lease(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]))
`
/**
 * Several lease calls of one hash slot in one execution, in arrival order (grouped like decisions): KEYS the sorted
 * set of each call, one per call; ARGV five arguments per call. Returns the three numbers of each call in order.
 */
const LEASE_BATCH_LUA = `${LEASE_FUNCTION}
local out = {}
for i = 1, #KEYS do
  local b = (i - 1) * 5
  local r = lease(KEYS[i], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), ARGV[b + 3], tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]))
  out[#out + 1] = r[1]
  out[#out + 1] = r[2]
  out[#out + 1] = r[3]
end
return out
`

/** The lease scripts with their SHA1s, hashed once: RedisStore sends them, script-table.ts pins them. */
export const LEASE_SCRIPT: Script = scriptOf(LEASE_LUA)
export const LEASE_BATCH_SCRIPT: Script = scriptOf(LEASE_BATCH_LUA)

/**
 * The lease script's reply { allowed, in flight, ms until the earliest lease expires }, from `start` in `reply`, as a
 * `LeaseDecision`.
 */
export function toLeaseDecision(reply: readonly unknown[], start = 0): LeaseDecision {
  return {
    allowed: Number(reply[start]) === 1,
    inFlight: Number(reply[start + 1]),
    nextExpiry: Number(reply[start + 2]),
  }
}
