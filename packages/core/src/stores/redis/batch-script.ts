/**
 * The script that decides a group of calls in one execution (docs/redis.md, "Grouped decisions"): the calls of one
 * rule set (one decision script) that waited for one node and one hash slot, decided one after another in arrival
 * order, exactly as the single-decision script decides them one call at a time.
 */
import { decisionScript, type Script, scriptCache } from './script.js'

/**
 * KEYS     the key sets of the clients in the group, one after another, `keysPerCall` keys each (a client's rule
 *          keys, then its penalty key), each set once however many of the calls name it
 * ARGV[1]  calls in the group (D)
 * ARGV[2]  keys per call
 * ARGV[3]  shared arguments (S): the rule set's parameters, then the penalty's, as the single script takes them
 * then     the S shared arguments
 * then     per call, 5 arguments: its key set (1-based), mode, now (epoch ms, or -1: the server's TIME, read once
 *          for the whole group), cost, and the `at` of a refund or the longest wait of a reservation (0 otherwise)
 *
 * Returns D records, one after another, each followed by its length: what the single-decision script returns
 * for each call.
 *
 * Exact by construction: each call runs the single-decision script's own body, as a function of its keys and
 * arguments, in arrival order. Keys that hold strings (the fixed window, sliding window counter, token bucket,
 * GCRA and penalty states) are read from Redis once per group and written once at its end: the body's GET, SET,
 * DEL and PTTL on them go through a table of the group's pending writes, which answers as Redis would after
 * those writes (time does not move while a script runs). Any other command on a key (the sliding window log's
 * sorted set) first writes what is pending for that key, then goes to Redis.
 */
function batchScript(codes: readonly number[], penalty: boolean): string {
  const body = decisionScript(codes, penalty).replaceAll("redis.call('TIME')", 'serverTime()')
  return `local real = redis
local pending, order = {}, {}
local function flushKey(key)
  local p = pending[key]
  if p == nil or not p.dirty then return end
  if p.value == false then real.call('DEL', key)
  elseif p.px then real.call('SET', key, p.value, 'PX', p.px)
  elseif p.ttl == -1 then real.call('SET', key, p.value)
  else real.call('SET', key, p.value, 'KEEPTTL') end
  p.dirty = false
end
local function entry(key)
  local p = pending[key]
  if p == nil then
    p = { dirty = false }
    pending[key] = p
    order[#order + 1] = key
  end
  return p
end
local function command(protected, name, key, ...)
  if name == 'GET' then
    local p = pending[key]
    if p ~= nil and p.value ~= nil then
      if p.value == false then return false end
      return p.value
    end
    local value = real.pcall('GET', key)
    if type(value) == 'table' and value.err then
      if protected then return value end
      return real.call('GET', key)
    end
    entry(key).value = value
    return value
  elseif name == 'SET' then
    local value, option, ms = ...
    local p = entry(key)
    if option == 'PX' then
      p.px = tonumber(ms)
    elseif option == 'KEEPTTL' then
      -- Keeps a TTL written earlier in this group; else the key's own, read when asked (ttl stays unknown).
      if p.value == false then p.ttl, p.px = -1, nil end
    else
      flushKey(key)
      pending[key] = nil
      if protected then return real.pcall('SET', key, ...) end
      return real.call('SET', key, ...)
    end
    if option == 'PX' then p.ttl = nil end
    p.value, p.dirty = value, true
    return 'OK'
  elseif name == 'DEL' and select('#', ...) == 0 then
    local p = entry(key)
    p.value, p.px, p.ttl, p.dirty = false, nil, -2, true
    return 1
  elseif name == 'PTTL' then
    local p = pending[key]
    if p ~= nil then
      if p.value == false then return -2 end
      if p.px then return p.px end
      if p.ttl then return p.ttl end
    end
    local ttl = real.call('PTTL', key)
    if p ~= nil and not p.px then p.ttl = ttl end
    return ttl
  end
  flushKey(key)
  pending[key] = nil
  if protected then return real.pcall(name, key, ...) end
  return real.call(name, key, ...)
end
local redis = {
  call = function(...) return command(false, ...) end,
  pcall = function(...) return command(true, ...) end,
}
local time
local function serverTime()
  if time == nil then time = real.call('TIME') end
  return time
end
local function decide(KEYS, ARGV)
${body}
end
local calls, perCall, shared = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out, n = {}, 0
local first = 4 + shared
for c = 0, calls - 1 do
  local at = first + c * 5
  local base = (tonumber(ARGV[at]) - 1) * perCall
  local keys = {}
  for k = 1, perCall do keys[k] = KEYS[base + k] end
  local mode = ARGV[at + 1]
  local args = { mode, ARGV[at + 2], ARGV[at + 3] }
  for s = 1, shared do args[3 + s] = ARGV[3 + s] end
  if mode == '2' or mode == '4' then args[4 + shared] = ARGV[at + 4] end
  local reply = decide(keys, args)
  for i = 1, #reply do out[n + i] = reply[i] end
  n = n + #reply
  out[n + 1] = #reply
  n = n + 1
end
for _, key in ipairs(order) do flushKey(key) end
return out
`
}

/** The batch script of the decision script for these algorithm codes (and a penalty, or none), built once. */
export const batchScriptFor: (codes: readonly number[], penalty: boolean) => Script = scriptCache(batchScript)

/** One call of a group: its client's keys, and its own mode, now, cost and refund `at`. */
export interface BatchCall {
  readonly keys: readonly string[]
  /** The single-decision script's ARGV: mode, now, cost, the shared arguments, and a refund's `at` last. */
  readonly args: readonly string[]
}

/**
 * KEYS and ARGV of a batch script call for `calls` of one rule set (the shared arguments are the same for all):
 * each client's key set is sent once.
 */
export function batchArguments(
  calls: readonly BatchCall[],
  sharedCount: number,
): { keys: string[]; args: string[] } {
  const perCall = calls[0]!.keys.length
  const keys: string[] = []
  const sets = new Map<string, number>()
  const args = [String(calls.length), String(perCall), String(sharedCount)]
  const first = calls[0]!.args
  for (let s = 0; s < sharedCount; s++) args.push(first[3 + s]!)
  for (const call of calls) {
    const id = call.keys[0]!
    let set = sets.get(id)
    if (set === undefined) {
      set = sets.size + 1
      sets.set(id, set)
      for (const key of call.keys) keys.push(key)
    }
    const refund = call.args.length > 3 + sharedCount
    args.push(
      String(set),
      call.args[0]!,
      call.args[1]!,
      call.args[2]!,
      refund ? call.args[3 + sharedCount]! : '0',
    )
  }
  return { keys, args }
}

/**
 * Splits a batch script's reply into each call's reply (as the single-decision script returns it): every record
 * is followed by its length.
 */
export function batchReplies(reply: readonly unknown[], calls: number): number[][] {
  const replies: number[][] = new Array(calls)
  let end = reply.length
  for (let c = calls - 1; c >= 0; c--) {
    const length = Number(reply[end - 1])
    const start = end - 1 - length
    const record: number[] = new Array(length)
    for (let i = 0; i < length; i++) record[i] = Number(reply[start + i])
    replies[c] = record
    end = start
  }
  return replies
}
