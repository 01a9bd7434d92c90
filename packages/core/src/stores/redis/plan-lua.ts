/**
 * Plans on Redis (algorithms/plans.ts): the fragment a decision script of a planned limiter gains after the
 * override prelude. The plan in force is recorded beside the key's state, in the same execution that decides:
 * one string key per client key and limiter namespace, `<namespace>{<hash>}:plan` (the hash tag of the key's
 * counters: one Cluster slot), holding `<until>|<plan JSON>` with a TTL to `until`. A call that writes (consume,
 * charge, reserve) rewrites it only when the recorded JSON differs or half its lifetime has passed: one GET per
 * decision, a SET per plan change or half lifetime. The plan's limits apply under the key's override
 * (`retuneRule`): its `rules` by policy name, read into `PL`.
 */

/** The suffix of a plan key, after the hash tag. */
export const PLAN_SUFFIX = 'plan'

/**
 * KEYS[key]: the plan key. A decision's: ARGV[at] the plan's JSON (`PlanTerms.recorded`), ARGV[at + 1] the record's
 * lifetime (ms); a read of the recorded plan (an operator's): ARGV[at] '', ARGV[at + 1] the plans' limits by name
 * (`RecordedPlans.table`), of which the recorded name's apply (limits are never read from the store: another writer
 * under the prefix could have left any). Sets `PL` (the plan's limits by rule name, or nil), `prec` (the plan's
 * name, for the reply: '' for none).
 */
export function planPrelude(key: number, at: number): string {
  return `local PL, prec = nil, ''
do
  local pj, stored = ARGV[${at}], redis.pcall('GET', KEYS[${key}])
  if type(stored) ~= 'string' then stored = '' end
  local su, sj = string.match(stored, '^(%d+)|(.*)$')
  local plan = nil
  if pj == '' then
    local ok, recorded = pcall(cjson.decode, sj or '')
    if ok and type(recorded) == 'table' and type(recorded.name) == 'string' then
      local known, table = pcall(cjson.decode, ARGV[${at + 1}])
      if known and type(table[recorded.name]) == 'table' then
        plan = table[recorded.name]
        prec = recorded.name
      end
    end
  else
    if mode == '0' or mode == '3' or mode == '4' then
      local life = tonumber(ARGV[${at + 1}])
      if sj ~= pj or tonumber(su) - now < life / 2 then
        redis.call('SET', KEYS[${key}], num(now + life) .. '|' .. pj, 'PX', life)
      end
    end
    plan = cjson.decode(pj)
    prec = plan.name
  end
  if plan and type(plan.rules) == 'table' then PL = plan.rules end
end
`
}
