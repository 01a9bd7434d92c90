import { isNoScript, type RedisScriptRunner } from '../redis/clients/runner.js'
import { scriptOf } from '../redis/script.js'

/**
 * @internal The script behind `SyncedStore`: adds a process's unflushed counts to the shared window counters
 * and returns the global counts, for every rule of every client key in the call, in one round trip (a tick sends
 * the keys used in its interval together, up to 256 per call).
 *
 * KEYS[i]  shared counters of one rule of one client: a string `w:c:p` (window index, count in window w, count in
 *          window w - 1). The rules of one client share one hash tag; on a Cluster, all keys of one call share
 *          one slot.
 * ARGV[1]  now in epoch ms, or -1 to read the server's TIME
 * ARGV[i+1]  KEYS[i]'s delta, `window:dwin:dcurr:dprev` (one argument per key, the cheapest to send and to read):
 *            window length (ms); the window index the delta was counted in (the sender's clock, set to server
 *            time); cost units admitted in that window and not yet sent, then in the window before it (either may
 *            be negative after a refund)
 *
 * Returns integers only: { now (ms), then per key: window index, count in it, count in the previous window }.
 * A delta for a window the server has already left behind twice is dropped: it no longer weighs on any decision.
 * A delta from a window ahead of the server (a sender's clock running early) counts in the current one. A key
 * whose stored window is ahead of `now` (a clock that stepped back, or a sender's clock behind another's) stays in
 * its window: a key's window never moves back.
 * Every write leaves the TTL after which the counters weigh nothing: the end of the next window while the current
 * one has a count (set by its first write, kept by the next ones), else the end of the current one. A sync without
 * a delta writes nothing. One MGET for all keys, then one SET per key with a delta.
 */
export const SYNC_LUA = syncLua(false)

/**
 * @internal `SYNC_LUA` for keys read with their override records (a limiter with `overrides: true`): the same, and
 * after the counters' keys, one record key per such client key (`<store prefix><scope>{<hash>}:o`, the same hash
 * tag, so one slot), read as they are, changed never.
 *
 * KEYS[1..#ARGV - 1]  the counters, as in `SYNC_LUA`; KEYS[#ARGV..]  the override records (their JSON strings)
 * ARGV                as in `SYNC_LUA`: one delta per counters key
 *
 * Returns `SYNC_LUA`'s reply, then each record's JSON as kept ('' for none): the store drops its ended parts at each
 * decision, on its own clock.
 */
export const SYNC_RECORDS_LUA = syncLua(true)

/** The sync script's text; with `records`, the keys past the counters' are override records, returned as read. */
function syncLua(records: boolean): string {
  const counters = records ? '#ARGV - 1' : '#KEYS'
  const tail = records
    ? `for i = #ARGV, #KEYS do
  out[#out + 1] = values[i] or ''
end
`
    : ''
  return `
local function num(n) return string.format('%.0f', n) end
local now = tonumber(ARGV[1])
if now < 0 then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local out = { now }
local values = redis.call('MGET', unpack(KEYS))
for i = 1, ${counters} do
  local a, b, c, d = string.match(ARGV[i + 1], '^(%d+):(%-?%d+):(%-?%d+):(%-?%d+)$')
  local window, dwin, dcurr, dprev = tonumber(a), tonumber(b), tonumber(c), tonumber(d)
  local win = math.floor(now / window)
  local curr, prev = 0, 0
  local raw = values[i]
  if raw then
    local w, c, p = string.match(raw, '^(%-?%d+):(%d+):(%d+)$')
    local stored = tonumber(w)
    -- Counted in a later window than this caller's now (its clock stepped back, or runs behind another's): the
    -- key stays in that window, never moves back (a count started in the older one would sit beside it).
    if stored > win then win = stored end
    if stored == win then
      curr, prev = tonumber(c), tonumber(p)
    elseif stored == win - 1 then
      prev = tonumber(c)
    end
  end
  -- Written in this window with a count already: its TTL runs to the end of the next window, as it must.
  local expiring = curr > 0
  if dcurr ~= 0 or dprev ~= 0 then
    if dwin > win then
      curr = curr + dcurr + dprev
    elseif dwin == win then
      curr, prev = curr + dcurr, prev + dprev
    elseif dwin == win - 1 then
      prev = prev + dcurr
    end
    curr, prev = math.max(0, curr), math.max(0, prev)
    local value = string.format('%.0f:%.0f:%.0f', win, curr, prev)
    if curr > 0 and expiring then
      redis.call('SET', KEYS[i], value, 'KEEPTTL')
    elseif curr > 0 then
      redis.call('SET', KEYS[i], value, 'PX', num((win + 2) * window - now))
    elseif prev > 0 then
      redis.call('SET', KEYS[i], value, 'PX', num((win + 1) * window - now))
    else
      redis.call('DEL', KEYS[i])
    end
  end
  out[#out + 1] = win
  out[#out + 1] = curr
  out[#out + 1] = prev
end
${tail}return out
`
}

/** @internal A Lua script and its SHA1, the identity EVALSHA runs it by. */
export interface SyncScript {
  readonly lua: string
  readonly sha1: string
}

/** @internal */
export const SYNC_SCRIPT: SyncScript = scriptOf(SYNC_LUA)

/** @internal */
export const SYNC_RECORDS_SCRIPT: SyncScript = scriptOf(SYNC_RECORDS_LUA)

/**
 * @internal How `SyncedStore` sends a script: the smallest contract, so that another client can stand in.
 * `run` resolves with the script's reply.
 */
export interface ScriptRunner {
  run(script: SyncScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>
}

/**
 * @internal Runs scripts through a client's `RedisScriptRunner` (stores/redis/clients/) by EVALSHA, and sends the
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
