import { ALGORITHMS_BY_CODE } from '../../algorithms/index.js'
import { PENALTY_LUA } from '../../algorithms/penalty.js'
import type { LuaRule, LuaTwin, Rule } from '../../algorithms/types.js'
import { sha1Hex } from '../../support/hash.js'
import { adoptRule, overridePrelude, RETAG, retuneRule } from './override-lua.js'
import { planPrelude } from './plan-lua.js'

/** @internal Modes of the decision script. */
export const MODE = { consume: 0, peek: 1, refund: 2, charge: 3, reserve: 4, give: 5 } as const

/**
 * @internal The mode of `RateLimiter.give` for `rules`: `give` when an algorithm gives otherwise than by a refund
 * at now (the sliding window log: its newest units, whatever their times), whose scripts alone know that mode;
 * else a refund at now, so that the other scripts stay as they were.
 */
export function giveMode(rules: readonly Rule[]): number {
  return rules.some((rule) => ALGORITHMS_BY_CODE.get(rule.script.code)!.lua.give !== undefined)
    ? MODE.give
    : MODE.refund
}

/**
 * Rules whose variables are Lua locals; the state of rules past these lives in a table (Lua allows 200 locals per
 * function, and a rule takes up to 13).
 */
const LOCAL_RULES = 10

/**
 * @internal The script behind RedisStore calls: all rules of a request, whatever their algorithms, decided
 * and written atomically in one round trip. It is generated for one sequence of algorithms (the rule set's, in
 * order): every rule's code is written inline with variables of its own, so that a call defines no functions
 * and builds no tables but its reply (a script that defines every algorithm as a table of closures on each call
 * costs Redis far more CPU per decision: docs/benchmarks.md).
 *
 * KEYS[i]  state key of rule i; all keys share one hash tag, so one Cluster slot
 * ARGV[1]  mode: 0 consume, 1 peek, 2 refund, 3 charge (settle, take: consume `cost` as far as it leaves no rule
 *          more than the debt given last past its limit; the reply's first number is the units charged instead of
 *          `allowed`), 4 reserve
 *          (consume; a request over the limit that every rule admits within the wait given last is charged for
 *          its slot, and the reply's first number is 1 + that wait in ms), 5 give (a refund at now whose rules give
 *          back their newest units admitted by now, whatever their times; only in scripts of an algorithm with a
 *          `give` of its own, the sliding window log: `giveMode`)
 * ARGV[2]  now in epoch ms, or -1 to read the server's TIME
 * ARGV[3]  cost, whole units
 * then     each rule's parameters (`Rule.script.params`, as many as its algorithm's twin takes), in rule order
 * then     with a penalty: after, within, block, factor, maxBlock (the last key is the penalty state, same hash tag)
 * then     with overrides: per rule its policy name and GCRA's window in ms (0 for the others); the last key is
 *          the client's override record (override-lua.ts), read in this execution
 * then     with a plan (planned limiters, plan-lua.ts): the plan's JSON as recorded ('': the recorded one) and how long a
 *          record lasts (ms); the plan key comes after the penalty key, before the record
 * last     refund only: the `at` (epoch ms) of the decision being refunded (give: now); reserve only: the longest
 *          wait (ms); charge only: the units each rule may owe past its limit (`StoreRequest.maxDebt`), or -1 for
 *          each rule's limit (at most what its state carries: `LuaTwin.carriedDebt`)
 *
 * Returns integers only: { allowed (1/0), now (ms), then per rule: remaining, reset (ms), retryAfter (ms),
 * then `repaired`, then with a penalty how long the key stays blocked (ms), then with overrides the record's JSON
 * or '', then for a peek only, per rule: the units it counts (`RuleOutcome.used`) }. A refund returns
 * { 1, now, repaired }.
 * `repaired` is a bit mask, bit i − 1 for rule i: that rule's key held a state the algorithm cannot read
 * (another Redis type, unparsable content) and was deleted and decided from a fresh state, or it had no TTL
 * and got one on a request that wrote nothing (a peek, a denial). The store reports it (RedisStore:
 * `Decision.notices`); the decision stands.
 * NOTE: numbers concatenated into strings go through num(): Lua's default number formatting keeps 14 digits only.
 * A number passed to redis.call as it is keeps 17 digits (Redis 6.2, `%.17g`) or its shortest exact form (7.0 and
 * later, and Valkey): exact for the whole numbers below 2^53 the algorithms compute, and cheaper than formatting.
 *
 * `reply` writes the statement that answers those numbers (given as Lua expressions): a list returned, by default;
 * the batch script appends them to its group's reply instead (batch-script.ts).
 */
export function decisionScript(
  codes: readonly number[],
  penalty = false,
  replyWith: (values: readonly string[]) => string = returnTable,
  overrides = false,
  planned = false,
): string {
  // With overrides, a state kept under limits other than the coded ones is tagged with them before any reply.
  const reply = overrides ? (values: readonly string[]) => `${RETAG}${replyWith(values)}` : replyWith
  const n = codes.length
  const twins = codes.map((code) => ALGORITHMS_BY_CODE.get(code)!.lua)
  // Only the scripts of an algorithm that gives otherwise than by a refund at now know the give mode (`giveMode`).
  const gives = twins.some((twin) => twin.give !== undefined)
  let arg = 3
  // With overrides: each rule's name and extra come after the rules' and the penalty's parameters.
  const overrideArgs = 3 + twins.reduce((sum, twin) => sum + twin.params, 0) + (penalty ? 5 : 0)
  // With a plan: its key after the penalty's (the record's comes last), its arguments after the overrides'.
  const planKey = n + (penalty ? 1 : 0) + 1
  const rules: LuaRule[] = twins.map((twin, index) => {
    const i = index + 1
    const v = (name: string) => (i <= LOCAL_RULES ? `${name}_${i}` : `R.${name}_${i}`)
    const params = Array.from({ length: twin.params }, (_, j) => v(`p${j}`))
    return { key: `KEYS[${i}]`, params, v }
  })
  const declare = (twin: LuaTwin, r: LuaRule, i: number) => {
    const names = [...r.params, ...twin.state.map(r.v)]
    const values = r.params.map(() => `tonumber(ARGV[${++arg}])`)
    return i <= LOCAL_RULES
      ? `local ${names.join(', ')} = ${values.join(', ')}\n`
      : `${r.params.map((name, j) => `${name} = ${values[j]}`).join('\n')}\n`
  }
  const each = (body: (twin: LuaTwin, r: LuaRule, i: number) => string) =>
    twins.map((twin, index) => body(twin, rules[index]!, index + 1)).join('')
  const bit = (i: number) => 2 ** (i - 1)

  const load = each(
    (twin, r, i) =>
      `${declare(twin, r, i)}${overrides ? overrideRule(codes[i - 1]!, r, arg - twin.params + 1, overrideArgs + 2 * i - 1, i, planned) : ''}${twin.load(r)}if ${r.v('broken')} then
  -- Unreadable: forget it, so that the key is rewritten from the fresh state load left.
  redis.call('DEL', ${r.key})
  repaired = repaired + ${bit(i)}
end
if not (${twin.fits(r, 'cost')}) then allowed = false end
`,
  )
  const penaltyArgs = arg
  // Reservation: the largest of the rules' waits; an algorithm that cannot reserve makes it infinite.
  const waits = each((twin, r) => twin.wait?.(r, 'cost') ?? 'w = math.huge\n')
  // "Fits" is linear in the cost: k leaves the rule at most d past its limit where k − d fits. The debt is at most
  // what the rule's state carries (`carriedDebt`).
  const charge = each(
    (twin, r) => `do
  local d = maxDebt
  if d < 0 then d = ${twin.limit(r)} end
${
  twin.carriedDebt === undefined
    ? ''
    : `  d = math.min(d, ${twin.carriedDebt(r)})
`
}  if not (${twin.fits(r, '(k - d)')}) then
    local lo, hi = 0, k - 1
    while lo < hi do
      local mid = math.ceil((lo + hi) / 2)
      if ${twin.fits(r, '(mid - d)')} then lo = mid else hi = mid - 1 end
    end
    k = lo
  end
end
`,
  )
  const values = [
    'first',
    'now',
    ...rules.flatMap((r) => [r.v('remaining'), r.v('reset'), r.v('retry')]),
    'repaired',
    ...(penalty ? ['blocked'] : []),
    ...(overrides ? ['orec'] : []),
    ...(planned ? ['prec'] : []),
  ]
  const used = rules.map((r, i) => twins[i]!.used(r))
  // NOTE: the mode stays a string (compared with constants: Lua interns strings, so that is one pointer compare),
  // and the usual `now` (-1) and cost (1) are recognised the same way: tonumber parses text on every call.
  const body = `local mode, now, cost, server = ARGV[1], -1, 1, ARGV[2] == '-1'
if ARGV[3] ~= '1' then cost = tonumber(ARGV[3]) end
if server then
  local time = redis.call('TIME')
  now = time[1] * 1000 + math.floor(time[2] / 1000)
else
  now = tonumber(ARGV[2])
end
local allowed, repaired = true, 0
${overrides ? overridePrelude(planKey + (planned ? 1 : 0)) : ''}${planned ? planPrelude(planKey, overrideArgs + 2 * n + 1) : ''}${n > LOCAL_RULES ? 'local R = {}\n' : ''}${load}${
  penalty
    ? `-- A read that tolerates a key of another type: returns the reply and whether the key is broken.
local function read(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then return nil, true end
  return reply, false
end
${PENALTY_LUA}local P, pen, blocked = nil, nil, 0
do
  local base = ${penaltyArgs}
  P = { after = tonumber(ARGV[base + 1]), within = tonumber(ARGV[base + 2]), block = tonumber(ARGV[base + 3]),
    factor = tonumber(ARGV[base + 4]), maxBlock = tonumber(ARGV[base + 5]) }
  pen = loadPenalty(KEYS[${n + 1}])
  if pen.broken then
    redis.call('DEL', pen.key)
    repaired = repaired + ${bit(n + 1)}
  end
  -- A blocked key is denied whatever its rules say, and its denials are not counted again.
  blocked = math.max(0, pen['until'] - now)
  if blocked > 0 then allowed = false end
end
`
    : ''
}
local wait = 0
if mode == '${MODE.reserve}'${penalty ? ' and blocked == 0' : ''} then
  local w = 0
${waits}  if w > 0 and w <= tonumber(ARGV[#ARGV]) then wait, allowed = w, true end
end
if mode == '${MODE.refund}'${gives ? ` or mode == '${MODE.give}'` : ''} then
  local at = tonumber(ARGV[#ARGV])
${each((twin, r) => `${twin.give === undefined ? twin.refund(r, 'cost', 'at') : `if mode == '${MODE.give}' then\n${twin.give(r, 'cost')}else\n${twin.refund(r, 'cost', 'at')}end\n`}${twin.persist(r, false)}`)}  ${reply(['1', 'now', 'repaired'])}
end

if mode == '${MODE.charge}' then
  -- The largest k <= cost that leaves no rule more than its debt past its limit ("fits" only gets harder as k
  -- grows): a settled cost is charged in full up to that debt; a take's (debt 0) up to the quota left.
  local k, maxDebt = cost, tonumber(ARGV[#ARGV])
${charge}  allowed, cost = true, k
end

-- Admitted: retry tells when a cost-1 request passes next (the reset headers' value at remaining 0).
local pending, denied = 0, 1
if not allowed then denied = cost end
if wait > 0 then
  local reserveAt = now + wait
${each((twin, r) => (twin.reserve === undefined ? '' : `${twin.reserve(r, 'cost', 'reserveAt')}${twin.persist(r, false)}`))}elseif allowed and (mode == '${MODE.consume}' or mode == '${MODE.charge}' or mode == '${MODE.reserve}') then
${each((twin, r) => `${twin.consume(r, 'cost')}${twin.persist(r, true)}`)}else
  -- A peek reports the units free now: nothing is pending.
  -- Repair a key found without a TTL (written by hand, or PERSISTed): it must not live forever. A key in a
  -- format of an older version is rewritten in the current one.
${each(
  (
    twin,
    r,
    i,
  ) => `if ${twin.state.includes('convert') ? `${r.v('convert')} or ` : ''}redis.call('PTTL', ${r.key}) == -1 then
${twin.persist(r, false)}if not (${r.v('broken')}${twin.state.includes('convert') ? ` or ${r.v('convert')}` : ''}) then repaired = repaired + ${bit(i)} end
end
`,
)}end
local remaining, reset, retry
${each(
  (twin, r, i) =>
    `${twin.report(r, 'pending', 'denied')}${i <= LOCAL_RULES ? 'local ' : ''}${r.v('remaining')}, ${r.v('reset')}, ${r.v('retry')} = remaining, reset, retry\n`,
)}${
  penalty
    ? `if not allowed and blocked == 0 and (mode == '${MODE.consume}' or mode == '${MODE.reserve}') then
  blocked = recordDenial(P, pen, now)
  persistPenalty(P, pen, now)
elseif pen.loaded and not pen.broken and redis.call('PTTL', pen.key) == -1 then
  persistPenalty(P, pen, now)
end
`
    : ''
}local first = allowed and 1 or 0
if mode == '${MODE.charge}' then first = cost end
if wait > 0 then first = 1 + wait end
if mode == '${MODE.peek}' then
  ${reply([...values, ...used])}
end
${reply(values)}
`
  // The helper is defined (a closure per call) only in scripts that use it.
  return body.includes('num(') ? `local function num(n) return string.format('%.0f', n) end\n${body}` : body
}

/**
 * With overrides, per rule before its state is loaded: its limits in force (`retuneRule`), then its state
 * converted to them (`adoptRule`). `coded`: the ARGV index of its first parameter; `names`: of its name and extra.
 */
function overrideRule(
  code: number,
  r: LuaRule,
  coded: number,
  names: number,
  index: number,
  planned: boolean,
): string {
  return `${retuneRule(code, r, names, planned)}${adoptRule(code, r, coded, index)}`
}

/** The single-decision script's reply statement: its numbers as one list. */
function returnTable(values: readonly string[]): string {
  return `return { ${values.join(', ')} }`
}

export interface Script {
  readonly lua: string
  readonly sha1: string
}

/** A Lua text with its SHA1, the identity EVALSHA runs it by: every script the stores send is hashed here. */
export function scriptOf(lua: string): Script {
  return Object.freeze({ lua, sha1: sha1Hex(lua) })
}

/**
 * Scripts built from a sequence of algorithm codes (and a penalty, or none) by `build`, each built and hashed
 * once per distinct sequence.
 */
export function scriptCache(
  build: (codes: readonly number[], penalty: boolean, overrides: boolean, planned: boolean) => string,
): (codes: readonly number[], penalty: boolean, overrides?: boolean, planned?: boolean) => Script {
  const scripts = new Map<string, Script>()
  return (codes, penalty, overrides = false, planned = false) => {
    const key = `${codes.join(',')}${penalty ? '+p' : ''}${overrides ? '+o' : ''}${planned ? '+l' : ''}`
    let script = scripts.get(key)
    if (script === undefined) {
      script = scriptOf(build(codes, penalty, overrides, planned))
      scripts.set(key, script)
    }
    return script
  }
}

const decisionScripts = scriptCache((codes, penalty, overrides, planned) =>
  decisionScript(codes, penalty, returnTable, overrides, planned),
)

/**
 * The script for a sequence of algorithm codes, in rule order (and a penalty, or none; reading the key's override
 * record, or not), built once per sequence.
 */
export function scriptFor(
  codes: Iterable<number>,
  penalty = false,
  overrides = false,
  planned = false,
): Script {
  return decisionScripts([...codes], penalty, overrides, planned)
}

/** @internal How many parameters the script takes for a rule of algorithm `code`. */
export function paramCount(code: number): number {
  return ALGORITHMS_BY_CODE.get(code)!.lua.params
}
