/**
 * The script that decides a group of calls in one execution (docs/redis.md, "Grouped decisions"): the calls of one
 * rule set (one decision script) that waited for one node and one hash slot, decided one after another in arrival
 * order, exactly as the single-decision script decides them one call at a time.
 */
import { decisionScript, MODE, type Script, scriptCache } from './script.js'

/**
 * KEYS     the key sets of the clients in the group, one after another, `keysPerCall` keys each (a client's rule
 *          keys, then its penalty key), each set once however many of the calls name it
 * ARGV[1]  calls in the group (D)
 * ARGV[2]  keys per call
 * ARGV[3]  shared arguments (S): the rule set's parameters, then the penalty's, as the single script takes them
 * then     the S shared arguments
 * then     per call, in arrival order: its key set (1-based) alone for a plain call (consume, the server's TIME,
 *          cost 1: the usual one); otherwise the key set negated, then mode, now (epoch ms, or -1: the server's
 *          TIME, read once for the whole group), cost, and the `at` of a refund or the longest wait of a
 *          reservation (0 otherwise)
 *
 * Returns D records, one after another, each preceded by its length: what the single-decision script returns
 * for each call (script-table.ts, "Replies").
 *
 * Exact by construction: each call runs the single-decision script's own body, as a function of its keys and
 * arguments, in arrival order. Keys that hold strings (the fixed window, sliding window counter, token bucket,
 * GCRA and penalty states) are read from Redis once per group (one MGET for the whole group when it holds
 * several clients) and written once at its end: the body's GET, SET,
 * DEL and PTTL on them go through a table of the group's pending writes, which answers as Redis would after
 * those writes (time does not move while a script runs). Any other command on a key (the sliding window log's
 * sorted set) first writes what is pending for that key, then goes to Redis.
 * PERF: a call builds no table of its own: its keys and arguments are written into two tables reused by
 * every call, and its reply goes straight into the group's.
 */
function batchScript(
  codes: readonly number[],
  penalty: boolean,
  overrides: boolean,
  planned: boolean,
): string {
  const body = decisionScript(codes, penalty, appendRecord, overrides, planned).replaceAll(
    "redis.call('TIME')",
    'serverTime()',
  )
  return `local real = redis
-- The group's pending writes, by key: the value (false: deleted), a TTL to set (ms), the TTL known (-1: none,
-- -2: no key), and whether the key must be written at the end; flat tables, nothing built per key.
local vals, pxs, ttls, dirty, order, dirtyCount = {}, {}, {}, {}, {}, 0
local function flushKey(key)
  if not dirty[key] then return end
  local value = vals[key]
  if value == false then real.call('DEL', key)
  elseif pxs[key] then real.call('SET', key, value, 'PX', pxs[key])
  elseif ttls[key] == -1 then real.call('SET', key, value)
  else real.call('SET', key, value, 'KEEPTTL') end
  dirty[key] = nil
end
local function mark(key)
  if not dirty[key] then
    dirty[key] = true
    dirtyCount = dirtyCount + 1
    order[dirtyCount] = key
  end
end
local function forget(key)
  flushKey(key)
  vals[key], pxs[key], ttls[key] = nil, nil, nil
end
local function get(protected, key)
  local value = vals[key]
  if value ~= nil then return value end
  value = real.pcall('GET', key)
  if type(value) == 'table' and value.err then
    if protected then return value end
    return real.call('GET', key)
  end
  vals[key] = value
  return value
end
-- The calls the decision scripts make on a key whose state is a string answer from the pending writes; any other
-- goes to Redis as it is, after the key's pending write.
local function command(protected, name, key, ...)
  if name == 'GET' then return get(protected, key)
  elseif name == 'SET' then
    local a, b, c = ...
    if b == 'PX' then
      pxs[key], ttls[key] = tonumber(c), nil
    elseif b == 'KEEPTTL' then
      -- Keeps a TTL written earlier in this group; else the key's own, read when asked (ttl stays unknown).
      if vals[key] == false then ttls[key], pxs[key] = -1, nil end
    else
      forget(key)
      if protected then return real.pcall('SET', key, ...) end
      return real.call('SET', key, ...)
    end
    vals[key] = a
    mark(key)
    return 'OK'
  elseif name == 'DEL' and select('#', ...) == 0 then
    vals[key], pxs[key], ttls[key] = false, nil, -2
    mark(key)
    return 1
  elseif name == 'PTTL' then
    local value = vals[key]
    if value ~= nil then
      if value == false then return -2 end
      if pxs[key] then return pxs[key] end
      if ttls[key] then return ttls[key] end
    end
    local ttl = real.call('PTTL', key)
    if value ~= nil and not pxs[key] then ttls[key] = ttl end
    return ttl
  end
  forget(key)
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
local out, n = {}, 0
local function decide(KEYS, ARGV)
${body}
end
local calls, perCall, shared = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local keys, args = {}, {}
${body.includes("'GET'") ? PREFETCH : ''}for s = 1, shared do args[3 + s] = ARGV[3 + s] end
local last, a = 4 + shared, 4 + shared
for c = 1, calls do
  local set = tonumber(ARGV[a])
  if set > 0 then
    args[1], args[2], args[3], args[last] = '0', '-1', '1', nil
    a = a + 1
  else
    set = -set
    local mode = ARGV[a + 1]
    args[1], args[2], args[3] = mode, ARGV[a + 2], ARGV[a + 3]
    if mode == '2' or mode == '3' or mode == '4'${body.includes("mode == '5'") ? " or mode == '5'" : ''} then args[last] = ARGV[a + 4] else args[last] = nil end
    a = a + 5
  end
  local base = (set - 1) * perCall
  for k = 1, perCall do keys[k] = KEYS[base + k] end
  decide(keys, args)
end
for i = 1, dirtyCount do flushKey(order[i]) end
return out
`
}

/**
 * With several key sets in the group, one MGET reads them all ahead (1,000 keys per MGET at most: Lua's `unpack`
 * has a limit), in place of one GET per key: a value found is what the body's GET then answers. MGET answers nil
 * for a missing key and for a key of another type (an older format, or foreign content): those are left to the
 * body's own GET, which tells the two apart.
 */
const PREFETCH = `if #KEYS > perCall then
  for from = 1, #KEYS, 1000 do
    local to = math.min(#KEYS, from + 999)
    local values = real.call('MGET', unpack(KEYS, from, to))
    for i = from, to do
      local value = values[i - from + 1]
      if value then vals[KEYS[i]] = value end
    end
  end
end
`

/** A call's reply inside the batch script: its length, then its numbers, appended to the group's reply. */
function appendRecord(values: readonly string[]): string {
  const slots = values.map((_, i) => `out[n + ${i + 2}]`).join(', ')
  return `out[n + 1], ${slots} = ${values.length}, ${values.join(', ')}
  n = n + ${values.length + 1}
  return`
}

/** The batch script of the decision script for these algorithm codes (and a penalty, or none), built once. */
export const batchScriptFor: (
  codes: readonly number[],
  penalty: boolean,
  overrides?: boolean,
  planned?: boolean,
) => Script = scriptCache(batchScript)

/** One decision of a group: its client's key set and its own mode, now, cost and `at`. */
export interface BatchCall {
  /** The beginning of the client's keys: each key is this and one of the rule set's suffixes. */
  readonly base: string
  readonly mode: number
  /** Epoch ms, or -1: the server's TIME. */
  readonly now: number
  readonly request: { readonly cost: number }
  /** A refund's `at`, a reservation's longest wait (ms) or a charge's `maxDebt` (-1: each rule's limit); 0 otherwise. */
  readonly at: number
  /** With overrides: the client's override record, the last key of its set (same hash tag). */
  readonly record?: string | undefined
}

/** The keys of one call: its base and each suffix, then its override record when it reads one. */
export function callKeys(call: BatchCall, suffixes: readonly string[]): string[] {
  const keys = suffixes.map((suffix) => `${call.base}${suffix}`)
  if (call.record !== undefined) keys.push(call.record)
  return keys
}

/** The arguments of one decision as the single-decision script takes them (script.ts). */
export function singleArguments(call: BatchCall, shared: readonly string[]): string[] {
  const args = [MODE_ARGS[call.mode]!, numberArg(call.now), numberArg(call.request.cost)]
  for (const arg of shared) args.push(arg)
  if (
    call.mode === MODE.refund ||
    call.mode === MODE.charge ||
    call.mode === MODE.reserve ||
    call.mode === MODE.give
  )
    args.push(numberArg(call.at))
  return args
}

/**
 * KEYS and ARGV of a batch script call for `calls` of one rule set, whose keys end in `suffixes` and whose shared
 * arguments are `shared`: each client's key set is sent once, and a plain call (consume, server time, cost 1) as
 * its key set alone.
 */
export function batchArguments(
  calls: readonly BatchCall[],
  suffixes: readonly string[],
  shared: readonly string[],
): { keys: string[]; args: string[] } {
  const keys: string[] = []
  // Most groups are one client over and over (a hot key) or a new one each call: the last set is checked first.
  let sets: Map<string, number> | undefined
  let lastBase = ''
  let lastSet = 0
  const perCall = suffixes.length + (calls[0]?.record === undefined ? 0 : 1)
  const args = [String(calls.length), String(perCall), String(shared.length)]
  for (const arg of shared) args.push(arg)
  for (const call of calls) {
    const base = call.base
    let set = base === lastBase ? lastSet : sets?.get(base)
    if (set === undefined) {
      set = keys.length / perCall + 1
      sets ??= new Map()
      sets.set(base, set)
      for (const suffix of suffixes) keys.push(`${base}${suffix}`)
      if (call.record !== undefined) keys.push(call.record)
    }
    lastBase = base
    lastSet = set
    const { mode, now, at } = call
    const cost = call.request.cost
    if (mode === MODE.consume && now === -1 && cost === 1) args.push(String(set))
    else args.push(String(-set), MODE_ARGS[mode]!, numberArg(now), numberArg(cost), numberArg(at))
  }
  return { keys, args }
}

/**
 * Reads a batch script's reply, one record per call in order (each preceded by its length): `each` receives the
 * index of the call and where its record starts and how long it is. False when the reply does not hold `calls`
 * records of at least two numbers.
 */
export function eachRecord(
  reply: readonly unknown[],
  calls: number,
  each: (call: number, start: number, length: number) => void,
): boolean {
  let at = 0
  for (let call = 0; call < calls; call++) {
    const length = Number(reply[at])
    if (!(length >= 2) || at + length >= reply.length) return false
    each(call, at + 1, length)
    at += length + 1
  }
  return at === reply.length
}

/** The decision script's modes as arguments, rendered once. */
const MODE_ARGS = Object.values(MODE).map(String)

/** A whole number as the scripts take it: the usual ones without formatting. */
function numberArg(value: number): string {
  return value === -1 ? '-1' : value === 0 ? '0' : value === 1 ? '1' : String(value)
}
