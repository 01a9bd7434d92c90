import { createHash } from 'node:crypto'
import { isNoScript, type RedisScriptRunner } from '../stores/clients/runner.js'

/**
 * @internal The one script behind `SyncedStore`: adds a process's unflushed counts to the shared window counters
 * of one client and returns the global counts, for every rule of that client, in one round trip.
 *
 * KEYS[i]  shared counters of rule i: a hash { w = window index, c = count in window w, p = count in window
 *          w - 1 }. All keys of one call share one hash tag, so one Cluster slot.
 * ARGV[1]  now in epoch ms, or -1 to read the server's TIME
 * ARGV[4i-2]  rule i: window length (ms)
 * ARGV[4i-1]  rule i: the window index the delta was counted in (the sender's clock, set to server time)
 * ARGV[4i]    rule i: cost units admitted in that window and not yet sent (may be negative after a refund)
 * ARGV[4i+1]  rule i: cost units admitted in the window before it and not yet sent
 *
 * Returns integers only: { now (ms), then per rule: window index, count in it, count in the previous window }.
 * A delta for a window the server has already left behind twice is dropped: it no longer weighs on any decision.
 * A delta from a window ahead of the server (a sender's clock running early) counts in the current one.
 * Every write sets the TTL after which the counters weigh nothing; a sync without a delta writes nothing.
 */
export const SYNC_LUA = `
local function num(n) return string.format('%.0f', n) end
local now = tonumber(ARGV[1])
if now < 0 then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local out = { now }
for i = 1, #KEYS do
  local b = 4 * i - 2
  local window, dwin = tonumber(ARGV[b]), tonumber(ARGV[b + 1])
  local dcurr, dprev = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  local win = math.floor(now / window)
  local raw = redis.call('HMGET', KEYS[i], 'w', 'c', 'p')
  local stored = tonumber(raw[1])
  local curr, prev = 0, 0
  if stored == win then
    curr, prev = tonumber(raw[2]) or 0, tonumber(raw[3]) or 0
  elseif stored == win - 1 then
    prev = tonumber(raw[2]) or 0
  end
  if dcurr ~= 0 or dprev ~= 0 then
    if dwin > win then
      curr = curr + dcurr + dprev
    elseif dwin == win then
      curr, prev = curr + dcurr, prev + dprev
    elseif dwin == win - 1 then
      prev = prev + dcurr
    end
    curr, prev = math.max(0, curr), math.max(0, prev)
    local until_next = (win + 1) * window - now
    if curr > 0 or prev > 0 then
      redis.call('HSET', KEYS[i], 'w', num(win), 'c', num(curr), 'p', num(prev))
      if curr > 0 then until_next = until_next + window end
      redis.call('PEXPIRE', KEYS[i], num(until_next))
    else
      redis.call('DEL', KEYS[i])
    end
  end
  out[#out + 1] = win
  out[#out + 1] = curr
  out[#out + 1] = prev
end
return out
`

/** @internal A Lua script and its SHA1, the identity EVALSHA runs it by. */
export interface SyncScript {
  readonly lua: string
  readonly sha1: string
}

/** @internal */
export const SYNC_SCRIPT: SyncScript = Object.freeze({
  lua: SYNC_LUA,
  sha1: createHash('sha1').update(SYNC_LUA).digest('hex'),
})

/**
 * @internal How `SyncedStore` sends a script: the smallest contract, so that another client can stand in.
 * `run` resolves with the script's reply.
 */
export interface ScriptRunner {
  run(script: SyncScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>
}

/**
 * @internal Runs scripts through a client's `RedisScriptRunner` (stores/clients/) by EVALSHA, and sends the
 * script text (EVAL) only when the server answers NOSCRIPT: after a restart or a failover. A script that failed
 * for any other reason, or timed out, is never sent again by this runner.
 */
export function scriptRunnerOn(commands: RedisScriptRunner): ScriptRunner {
  return {
    async run(script, keys, args) {
      const strings = args.map(String)
      try {
        return await commands.evalSha(script.sha1, keys, strings)
      } catch (error) {
        if (!isNoScript(error)) throw error
        return commands.eval(script.lua, keys, strings)
      }
    },
  }
}
