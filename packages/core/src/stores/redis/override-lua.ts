/**
 * Overrides and manual blocks on Redis (docs/operating-limits.md): the fragment a decision script gains
 * with `overrides` (the key's record read in the same execution that decides); the small scripts that change,
 * read and list records are in override-scripts.ts. Without `overrides` the decision scripts hold none of this: their text, and so their
 * SHA1, stay what they were (script-table.test.ts pins both).
 *
 * A record is one string key per client key and limiter scope, `<store prefix><scope>{<hash>}:o`, under the same
 * hash tag as the key's counters (one Cluster slot): the JSON of an `OverrideRecord` (algorithms/override.ts),
 * kept with a TTL that ends with its last part (none while a part never ends). The TTL only cleans up: every read
 * drops a part whose `until` has passed on the script's clock (the server's TIME, or the store's `clock`).
 * NOTE: cjson writes numbers with 14 significant digits: exact for epoch ms and for limits below 10^14.
 */
import { rateWindowOf } from '../../algorithms/rule.js'
import type { LuaRule, Rule } from '../../algorithms/types.js'

/** The suffix of a record's key, after the hash tag. */
export const RECORD_SUFFIX = 'o'

/** Reads a record: its table, ended parts at `now` dropped (nil when nothing is left), and its JSON as kept. */
export const READ_RECORD = `local function readRecord(key, now)
  local raw = redis.call('GET', key)
  if type(raw) ~= 'string' then return nil end
  local ok, rec = pcall(cjson.decode, raw)
  if not ok or type(rec) ~= 'table' then return nil end
  if type(rec.limits) == 'table' and type(rec.limits['until']) == 'number' and rec.limits['until'] <= now then
    rec.limits = nil
  end
  if type(rec.block) == 'table' and not (type(rec.block['until']) == 'number' and rec.block['until'] > now) then
    rec.block = nil
  end
  if rec.limits == nil and rec.block == nil then return nil end
  return rec, raw
end
`

/**
 * The prelude of a decision script with overrides, after `now` and `allowed` are set: reads the record (KEYS[key])
 * into `O` (the limits in force, or nil) and `OB` (the manual block, or nil), and keeps its JSON as kept in `orec`
 * for the reply (the store drops its ended parts at the decision's `now`, as the script did: no encoding here). A blocked key is refused and nothing is counted: a consume or a reservation runs as a peek.
 */
export function overridePrelude(key: number): string {
  return `${READ_RECORD}local O, OB, orec, T = nil, nil, '', {}
do
  local rec, raw = readRecord(KEYS[${key}], now)
  if rec then O, OB, orec = rec.limits, rec.block, raw end
end
if OB then
  allowed = false
  if mode == '0' or mode == '4' then mode = '1' end
end
`
}

/**
 * Per rule, before its state is loaded: when the record's limits name the rule (ARGV[name], its policy name) or
 * set every rule's limit, its parameters become the ones `rulesWith` (algorithms/override.ts) makes in
 * JavaScript; ARGV[extra] holds what the parameters do not (GCRA's window in ms). Keyed by algorithm code.
 */
const RETUNE: Readonly<Record<number, (r: LuaRule, extra: string) => string>> = {
  // The window algorithms: the limit, same window.
  1: (r) => `${r.params[0]} = own.limit\n`,
  2: (r) => `${r.params[0]} = own.limit\n`,
  3: (r) => `${r.params[0]} = own.limit\n`,
  // The quota: the limit, same periods.
  6: (r) => `${r.params[0]} = own.limit\n`,
  // Token bucket: the refill per the same interval, and the capacity (in proportion when none is given).
  4: (r) => {
    const [capacity, refill] = r.params
    return `${capacity} = own.burst or math.max(1, math.floor(${capacity} * own.limit / ${refill}))
${refill} = own.limit
`
  },
  // GCRA: the rate per the same window (ticks made whole again), and the burst.
  5: (r, window) => {
    const [scale, interval, burst] = r.params
    return `do
  local window = tonumber(${window})
  local limit = ${scale} * window / ${interval}
  ${burst} = own.burst or math.max(1, math.floor(${burst} * own.limit / limit))
  local a, b = own.limit, window
  while b > 0 do a, b = b, a % b end
  ${scale}, ${interval} = own.limit / a, window / a
end
`
  },
}

/**
 * The retune of one rule (`RETUNE`), its name and extra at ARGV[at] and ARGV[at + 1]; `planned`: under the key's
 * override, the plan's limits (`PL`, plan-lua.ts) apply to the rules the override leaves as they are.
 */
export function retuneRule(code: number, r: LuaRule, at: number, planned = false): string {
  const retune = RETUNE[code]
  if (retune === undefined) return ''
  if (planned) {
    return `do
  local own = nil
  if O then own = (type(O.rules) == 'table' and O.rules[ARGV[${at}]]) or (O.limit and O) or nil end
  if own == nil and PL then own = PL[ARGV[${at}]] end
  if type(own) == 'table' and type(own.limit) == 'number' then
${retune(r, `ARGV[${at + 1}]`)}  end
end
`
  }
  return `if O then
  local own = (type(O.rules) == 'table' and O.rules[ARGV[${at}]]) or (O.limit and O) or nil
  if own then
${retune(r, `ARGV[${at + 1}]`)}  end
end
`
}

/**
 * GCRA and the token bucket keep one number that depends on the rate: a state written under limits other than
 * the coded ones carries them, `|scale|interval|burst` or `|capacity|refill|interval` after the coded format, and
 * is converted before it is loaded whenever the limits in force differ from the ones it was written with (the
 * Lua twin of `AlgorithmLogic.adopt`: the units used kept, rounded up, so that a change never admits more than
 * the new limit allows). A state under the coded limits has the coded format, which every script reads.
 */
const ADOPT: Readonly<Record<number, (to: readonly string[]) => string>> = {
  // GCRA: the TAT in ticks of 1/scale ms; `used` ticks ahead of now converted to the new interval.
  // NOTE: ceil(used × interval / from) without BigInt (gcra.ts's `adopt` uses it): whole units of `from` ticks and
  // the rest apart, exact while from × interval stays below 2^53 (both are at most the window in ms).
  5: ([scale, interval]) => `local tat = tonumber(string.match(body, '^(%d+)$') or '')
if tat then
  local used = math.max(0, tat - now * f0)
  if used == 0 then body = false
  else
    local whole = math.floor(used / f1)
    local rest = used - whole * f1
    if rest < 0 then whole, rest = whole - 1, rest + f1 elseif rest >= f1 then whole, rest = whole + 1, rest - f1 end
    tat = now * ${scale} + whole * ${interval} + math.ceil(rest * ${interval} / f1)
    body, ttl = num(tat), math.ceil((tat - now * ${scale}) / ${scale})
  end
end
`,
  // Token bucket: tokens in 1/interval units; refilled to now at the old rate, then the units used carried over.
  4: ([capacity, refill, interval]) => `local t, l, f = string.match(body, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
if not t then
  t, l = string.match(body, '^(%d+):(%-?%d+)$')
  f = l
end
if t then
  t, l, f = tonumber(t), tonumber(l), tonumber(f)
  local fromFull, full = f0 * f2, ${capacity} * ${interval}
  local elapsed = now - l
  if elapsed > 0 then
    if elapsed >= math.ceil((fromFull - t) / f1) then t = fromFull else t = t + elapsed * f1 end
    l = now
  end
  t = full - (fromFull - t)
  if t >= full then t, f = full, now end
  ttl = math.ceil((full - t) / ${refill})
  if ttl <= 0 then body = false else body = num(t) .. ':' .. num(l) .. ':' .. num(f) end
end
`,
}

/**
 * NOTE: the conversion rewrites the state's form (never what it holds) even on a peek: `inspect` under an override
 * may rewrite a GCRA or token bucket key, the same units used in another form.
 *
 * Per GCRA or token bucket rule, after its limits in force are set and before its state is loaded: converts a
 * state kept under other limits (`ADOPT`), and marks the rule in `T` to have its state tagged with the limits
 * in force at the end (`retag`) when they are not the coded ones. `coded` is the ARGV index of its first coded
 * parameter.
 */
export function adoptRule(code: number, r: LuaRule, coded: number, index: number): string {
  const adopt = ADOPT[code]
  if (adopt === undefined) return ''
  const [p0, p1, p2] = r.params as [string, string, string]
  const codedParams = `tonumber(ARGV[${coded}]), tonumber(ARGV[${coded + 1}]), tonumber(ARGV[${coded + 2}])`
  return `do
  local raw = redis.pcall('GET', ${r.key})
  if type(raw) == 'string' then
    local body, ttl, f0, f1, f2 = raw, nil, ${codedParams}
    local plain, a, b, c = string.match(raw, '^([^|]*)|(%d+)|(%d+)|(%d+)$')
    if plain then body, f0, f1, f2 = plain, tonumber(a), tonumber(b), tonumber(c) end
    if f0 ~= ${p0} or f1 ~= ${p1} or f2 ~= ${p2} then
${adopt([p0, p1, p2])}    end
    if body == false then redis.call('DEL', ${r.key})
    elseif body ~= raw then
      if ttl then redis.call('SET', ${r.key}, body, 'PX', num(math.max(1, ttl)))
      else redis.call('SET', ${r.key}, body, 'KEEPTTL') end
    end
  end
  local c0, c1, c2 = ${codedParams}
  if c0 ~= ${p0} or c1 ~= ${p1} or c2 ~= ${p2} then
    T[${index}] = '|' .. num(${p0}) .. '|' .. num(${p1}) .. '|' .. num(${p2})
  end
end
`
}

/** Before a reply: the states of the rules marked in `T` tagged with the limits they were kept under. */
export const RETAG = `for i, tag in pairs(T) do
  local value = redis.pcall('GET', KEYS[i])
  if type(value) == 'string' and not string.find(value, '|', 1, true) then
    redis.call('SET', KEYS[i], value .. tag, 'KEEPTTL')
  end
end
`

/**
 * Per rule, its policy name and what the script needs beside its parameters to make it again with another limit
 * (override-lua.ts): GCRA's window in ms (`rateWindowOf`), 0 for the others.
 */
export function overrideArgs(rules: readonly Rule[]): string[] {
  return rules.flatMap((rule) => [rule.name, String(rateWindowOf(rule))])
}
