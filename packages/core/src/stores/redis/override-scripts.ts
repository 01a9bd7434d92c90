/**
 * The small scripts behind `Store.updateOverride`, `readOverride` and `listOverrides` on Redis: one execution each,
 * on the record's own key (override-lua.ts describes the record).
 */
import { READ_RECORD } from './override-lua.js'
import { scriptOf } from './script.js'

/** Sets `now`: ARGV[1] in epoch ms, or the server's TIME when it is -1. */
const NOW = `local now
if ARGV[1] == '-1' then
  local time = redis.call('TIME')
  now = time[1] * 1000 + math.floor(time[2] / 1000)
else
  now = tonumber(ARGV[1])
end
`

/**
 * Applies a change to one record (`Store.updateOverride`, the Lua twin of `applyOverrideChange`) on the script's
 * clock, and keeps it with a TTL that ends with its last part.
 *
 * KEYS[1]  the record
 * ARGV[1]  now in epoch ms, or -1 to read the server's TIME
 * ARGV[2]  the client key (kept in the record, for `list`)
 * ARGV[3]  the limits: their JSON, 'null' to remove them, '' to leave them
 * ARGV[4]  with limits: they end this many ms after now (or at their `until`, the earlier), '' for no TTL
 * ARGV[5]  the block: its length in ms from now, 'null' to remove it, '' to leave it
 * ARGV[6]  with a block: its reason, after one character (so that '' says none and '-' an empty reason)
 *
 * Returns the record's JSON as it stands after, or '' when nothing is left.
 */
export const UPDATE_OVERRIDE_SCRIPT = scriptOf(`${READ_RECORD}${NOW}local rec = readRecord(KEYS[1], now) or {}
rec.key = ARGV[2]
if ARGV[3] == 'null' then rec.limits = nil
elseif ARGV[3] ~= '' then
  local limits = cjson.decode(ARGV[3])
  if ARGV[4] ~= '' then
    local ends = now + tonumber(ARGV[4])
    if type(limits['until']) ~= 'number' or ends < limits['until'] then limits['until'] = ends end
  end
  rec.limits = limits
end
if ARGV[5] == 'null' then rec.block = nil
elseif ARGV[5] ~= '' then
  rec.block = { ['until'] = now + tonumber(ARGV[5]) }
  if ARGV[6] ~= '' then rec.block.reason = string.sub(ARGV[6], 2) end
end
if type(rec.limits) == 'table' and type(rec.limits['until']) == 'number' and rec.limits['until'] <= now then
  rec.limits = nil
end
if rec.block and rec.block['until'] <= now then rec.block = nil end
if rec.limits == nil and rec.block == nil then
  redis.call('DEL', KEYS[1])
  return ''
end
local ends = 0
if rec.limits then ends = rec.limits['until'] or math.huge end
if rec.block then ends = math.max(ends, rec.block['until']) end
local json = cjson.encode(rec)
if ends == math.huge then redis.call('SET', KEYS[1], json)
else redis.call('SET', KEYS[1], json, 'PX', string.format('%.0f', ends - now)) end
return json
`)

/**
 * Reads one record (`Store.readOverride`).
 *
 * KEYS[1]  the record
 * ARGV[1]  now in epoch ms, or -1 to read the server's TIME
 *
 * Returns the record's JSON, ended parts dropped, or '' when there is none.
 */
export const READ_OVERRIDE_SCRIPT = scriptOf(`${READ_RECORD}${NOW}local rec = readRecord(KEYS[1], now)
if rec == nil then return '' end
return cjson.encode(rec)
`)

/**
 * One SCAN step over one server's records of a scope (`Store.listOverrides`).
 *
 * KEYS     none (the script reads only the keys SCAN returns, on the server it runs on)
 * ARGV[1]  now in epoch ms, or -1 to read the server's TIME
 * ARGV[2]  the SCAN cursor
 * ARGV[3]  the MATCH pattern (the scope's records)
 * ARGV[4]  the COUNT hint
 *
 * Returns { next cursor, then the JSON of each live record found }. On a Cluster it runs wrapped by `onMaster`
 * (master-scan.ts), which adds the master's node id as ARGV[5].
 */
export const LIST_OVERRIDES_SCRIPT =
  scriptOf(`${READ_RECORD}${NOW}local step = redis.call('SCAN', ARGV[2], 'MATCH', ARGV[3], 'COUNT', ARGV[4])
local out = { step[1] }
for _, key in ipairs(step[2]) do
  -- A key of a slot this node imports (a migration under way) cannot be read here: left out, not a failed step.
  local ok, rec = pcall(readRecord, key, now)
  if ok and rec then out[#out + 1] = cjson.encode(rec) end
end
return out
`)

/** `text` as a SCAN MATCH pattern that matches it literally. */
export function literalPattern(text: string): string {
  return text.replace(/[*?[\]\\]/g, (char) => `\\${char}`)
}
