import { invalid, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import {
  type AnchorInput,
  CALENDAR_UNITS,
  type CalendarAnchor,
  CalendarPeriods,
  type CalendarUnit,
  parseAnchor,
  parseTimeZone,
} from './calendar.js'
import { countWithDebt, giveBackWithDebt, luaCountWithDebt, luaGiveBackWithDebt } from './counted-debt.js'
import { checkProduct, makeRule, parseCount, parseRuleName, parseShadow, parseWarnAt } from './rule.js'
import type { AlgorithmDefinition, AlgorithmLogic, LuaRule, LuaTwin, Rule } from './types.js'

/** Options of `quota`. */
export interface QuotaOptions {
  /** Units admitted per period: a positive whole number. */
  limit: number
  /** The calendar period the limit is counted per. */
  period: CalendarUnit
  /**
   * Where each period starts: a local date-time read in `timeZone` (`'2026-01-17T09:00'`: the 17th of each month at
   * 09:00 for a monthly quota; its weekday for a weekly one, its time for a daily one, its day and month for a yearly
   * one), a `Date` or epoch ms. An anchor on the 29th–31st falls on the month's last day in shorter months.
   * @default the calendar's own boundaries: midnight, Monday, the 1st, the 1st of January
   */
  anchor?: AnchorInput
  /** The IANA time zone the periods follow (daylight-saving changes included). @default 'UTC' */
  timeZone?: string
  /** Policy name for draft-8 headers. @default `'<limit>-per-<period>'` */
  name?: string
  /** Count and report, but never refuse (docs/rollout.md); `false` enforces. @default false */
  shadow?: boolean
  /**
   * A soft limit: the share of the quota (above 0, below 1) at which the key is said to be near it, once per key and
   * period (`DecisionEvent.nearLimit`; the middleware's `warnHeader`). @default the limiter's `nearLimit`
   */
  warnAt?: number
}

/**
 * The state of a quota: the end of the period it counts in (epoch ms), the units counted, and what a charge took
 * past the limit (the debt the next period starts with, one limit at most).
 */
interface QuotaState {
  end: number
  count: number
  debt: number
}

const CODE = 6

const QUOTA_OPTIONS = namesOf<QuotaOptions>({
  limit: true,
  period: true,
  anchor: true,
  timeZone: true,
  name: true,
  shadow: true,
  warnAt: true,
})

/** A period's nominal length (ms): the `w` of the policy headers; the true length follows the calendar. */
const NOMINAL_MS: Readonly<Record<CalendarUnit, number>> = {
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
}

/**
 * A quota on the calendar: `limit` units per day, week, month or year, whose periods follow the calendar (or a
 * billing anchor) in an IANA time zone, exact across processes on every store that decides with the rule's
 * periods (MemoryStore, RedisStore, SyncedStore through its RedisStore). Combine it with rate rules in one limiter:
 * `rules: [gcra({ limit: 600, window: '1m' }), quota({ limit: 1_000_000, period: 'month' })]` decides both in one
 * atomic step (docs/plans-and-quotas.md).
 *
 * The deciding process computes the periods' bounds (Lua has no time-zone data) and the store keeps the period's
 * end with its count: a process whose tzdata differs adopts the stored end. Units charged beyond the limit (a
 * settle's debt, at most one limit) carry into the next period.
 * @example quota({ limit: 1_000_000, period: 'month', anchor: '2026-01-17T09:00', timeZone: 'Europe/Paris' })
 */
export function quota(options: QuotaOptions): Rule {
  requireObject(options, 'quota', "{ limit: 1000000, period: 'month' }")
  rejectUnknownOptions(options, QUOTA_OPTIONS, 'quota rule')
  const limit = parseCount(options.limit, 'limit')
  const unit = options.period
  if (!CALENDAR_UNITS.includes(unit))
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'period', unit, "'day', 'week', 'month' or 'year'")
  const timeZone = parseTimeZone(options.timeZone ?? 'UTC')
  const anchor = parseAnchor(options.anchor, timeZone)
  return quotaRule(
    limit,
    { unit, timeZone, anchor },
    options.name,
    parseShadow(options.shadow),
    parseWarnAt(options.warnAt),
  )
}

/** A quota's calendar as plain data: what a store in another process makes the rule again from. */
export interface QuotaCalendar {
  unit: CalendarUnit
  timeZone: string
  anchor: CalendarAnchor
}

/** @internal The calendar of a quota rule (undefined for the other algorithms), as plain data. */
export function quotaCalendar(rule: Rule): QuotaCalendar | undefined {
  const periods = rule.periods
  if (periods === undefined) return undefined
  return { unit: periods.unit, timeZone: periods.timeZone, anchor: { ...periods.anchor } }
}

/**
 * @internal The quota rule of a checked limit and calendar (`quota`, an override's retune, a store rebuilding the
 * rule elsewhere: stores/local/remote.ts).
 */
export function quotaRule(
  limit: number,
  calendar: QuotaCalendar,
  name: string | undefined,
  shadow: boolean,
  warnAt?: number,
): Rule {
  parseCount(limit, 'limit')
  // Period ends and counts stay exact in doubles (twice the limit: a carried debt).
  checkProduct(limit, 2, '`limit`')
  const { unit, anchor } = calendar
  // The zone's canonical spelling: one calendar, one storage id, however the name was written.
  const timeZone = parseTimeZone(calendar.timeZone)
  const periods = new CalendarPeriods(unit, timeZone, anchor)
  return makeRule(
    {
      algorithm: 'quota',
      limit,
      windowMs: NOMINAL_MS[unit],
      name: parseRuleName(name, `${limit}-per-${unit}`),
      id: quotaId(unit, anchor, timeZone),
      maxCost: limit,
      shadow,
      ...(warnAt !== undefined && { warnAt }),
      logic: quotaLogic(limit, periods),
      script: Object.freeze({ code: CODE, params: Object.freeze([limit, 0, 0] as const) }),
      periods,
    },
    (newLimit) => quotaRule(newLimit, calendar, name, shadow, warnAt),
  )
}

/**
 * The storage id: `q`, the unit's initial, the anchor's fields that place the unit's periods, and the zone as
 * digits (a hash), so that quotas with other boundaries never share a count: `qm-17-32400-<zone>` is monthly from
 * the 17th at 09:00.
 */
function quotaId(unit: CalendarUnit, anchor: CalendarAnchor, timeZone: string): string {
  const time = anchor.hour * 3600 + anchor.minute * 60 + anchor.second
  const place =
    unit === 'day'
      ? [time]
      : unit === 'week'
        ? [anchor.weekday, time]
        : unit === 'month'
          ? [anchor.day, time]
          : [anchor.month, anchor.day, time]
  return `q${unit[0]}-${place.join('-')}-${zoneDigits(timeZone)}`
}

/** A zone name as 8 digits (FNV-1a): short, and only digits, as a storage id's tail must be. */
function zoneDigits(timeZone: string): string {
  if (timeZone === 'UTC') return '0'
  let hash = 0x811c9dc5
  for (let i = 0; i < timeZone.length; i++) hash = Math.imul(hash ^ timeZone.charCodeAt(i), 0x01000193) >>> 0
  return String(hash % 100_000_000).padStart(8, '0')
}

/**
 * @internal The bounds a store that cannot compute the periods itself (the Redis scripts) is given for a quota rule
 * at `now` (the deciding process's clock): the start and end of the period holding it and the end of the one after,
 * so that a store whose clock has passed the end still finds its period.
 */
export function quotaBounds(rule: Rule, now: number): readonly [number, number, number] {
  const { start, end, next } = rule.periods!.at(now)
  return [start, end, next]
}

function quotaLogic(limit: number, periods: CalendarPeriods): AlgorithmLogic<QuotaState> {
  /**
   * The end of the period after the one that ends at `end`: the period holding `now` knows it (`next`), without
   * moving the one period the calendar keeps (a flood of costly denials computes nothing).
   */
  const after = (end: number, now: number) => {
    const current = periods.at(now)
    return current.end === end ? current.next : periods.at(end).end
  }
  /**
   * The wait until `cost` fits: the period's end, or the next one's while the debt it carries (what a charge took past
   * the limit; never a count above a limit lowered since) leaves no room.
   */
  const waitFor = (state: QuotaState, now: number, cost: number) =>
    (Math.min(state.debt, limit) + cost <= limit ? state.end : after(state.end, now)) - now
  /** The wait until the whole quota is back: the period's end, or the next one's while a debt carries into it. */
  const whole = (state: QuotaState, now: number) => (state.debt > 0 ? after(state.end, now) : state.end) - now
  return {
    create: () => ({ end: 0, count: 0, debt: 0 }),
    advance(state, now) {
      // NOTE: only forward: a period whose end is still ahead stays, whoever computed it (another process's tzdata).
      if (now < state.end) return
      const period = periods.at(now)
      // A stored end inside this period (another process's tzdata placed it) keeps its count: one count, never two.
      if (state.end <= period.start) {
        // The period before: what a charge took past its limit is owed from this one (one limit at most). A count
        // above the limit that was no debt (used under a raise that has ended) is not carried.
        const previous = state.end > period.start - (period.end - period.start)
        state.count = previous ? Math.min(state.debt, limit) : 0
        state.debt = 0
      }
      state.end = period.end
    },
    fits: (state, _now, cost) => state.count + cost <= limit,
    // Only what was charged past the limit is owed from the next period (counted-debt.ts).
    consume: (state, _now, cost) => countWithDebt(state, limit, cost),
    carriedDebt: limit,
    refund(state, _now, cost, at) {
      if (at >= state.end || periods.at(at).end !== state.end) return
      giveBackWithDebt(state, limit, cost)
    },
    report(state, now, pending, deniedCost, into, i) {
      const count = state.count + pending
      into.remaining[i] = Math.max(0, limit - count)
      into.reset[i] = count > 0 ? whole(state, now) : 0
      into.retryAfter[i] = count + deniedCost > limit ? waitFor(state, now, deniedCost) : 0
    },
    ttl: (state, now) => (state.count > 0 ? whole(state, now) : 0),
    used: (state) => state.count,
  }
}

/**
 * Lua twin of `quotaLogic`. Key: a string `"<period end>:<count>"`, or `"<period end>:<count>:<debt>"` while a charge
 * left the count past the limit, with its TTL: the end of the period (or of the one after, while a debt carries into
 * it). Parameters: the limit, then the bounds the deciding process computed (`quotaBounds`): the start S and end E of
 * the period holding its `now`, and the end N of the one after. A state whose end has passed takes the period holding
 * the store's `now` among [.., S), [S, E) and [E, N); before S or past N (the process's clock more than a period
 * ahead of or behind the store's), periods of the length E − S before S or N − E after N: one that holds `now`, never
 * one that has ended nor one that has not begun.
 */
const LUA: LuaTwin = {
  params: 4,
  state: ['qend', 'count', 'qdebt', 'broken'],
  load: (r) => {
    const [L, S, E, N] = r.params
    const [end, count, debt] = ['qend', 'count', 'qdebt'].map(r.v)
    return `${end}, ${count}, ${debt} = 0, 0, 0
do
  local raw = redis.pcall('GET', ${r.key})
  if raw then
    local e, c, d
    if type(raw) == 'string' then e, c, d = string.match(raw, '^(%d+):(%d+):?(%d*)$') end
    if not e then ${r.v('broken')} = true
    else ${end}, ${count}, ${debt} = tonumber(e), tonumber(c), tonumber(d) or 0 end
  end
  if now >= ${end} then
    local start, finish
    if now < ${S} then
      local length = ${E} - ${S}
      start = ${S} - (math.floor((${S} - now - 1) / length) + 1) * length
      finish = start + length
    elseif now < ${E} then start, finish = ${S}, ${E}
    elseif now < ${N} then start, finish = ${E}, ${N}
    else
      local length = ${N} - ${E}
      finish = ${N} + (math.floor((now - ${N}) / length) + 1) * length
      start = finish - length
    end
    if ${end} <= start then
      if ${end} > start - (finish - start) then ${count} = math.min(${debt}, ${L}) else ${count} = 0 end
      ${debt} = 0
    end
    ${end} = finish
  end
end
`
  },
  fits: (r, cost) => `${r.v('count')} + ${cost} <= ${r.params[0]}`,
  consume: (r, cost) => luaCountWithDebt(r.v('count'), r.v('qdebt'), r.params[0]!, cost),
  refund: (r, cost, at) => {
    const [L, S, E, N] = r.params
    const [end, count, debt] = ['qend', 'count', 'qdebt'].map(r.v)
    return `if ${at} < ${end} and ((${at} >= ${S} and ${at} < ${E} and ${end} == ${E}) or (${at} >= ${E} and ${at} < ${N} and ${end} == ${N})) then
${luaGiveBackWithDebt(count!, debt!, L!, cost)}end
`
  },
  report: (r, pending, denied) => {
    const L = r.params[0]!
    const count = r.v('count')
    return `do
  local count = ${count} + ${pending}
  remaining, reset, retry = math.max(0, ${L} - count), 0, 0
  if count > 0 then reset = ${quotaWhole(r)} end
  if count + ${denied} > ${L} then retry = ${quotaWait(r, denied)} end
end
`
  },
  carriedDebt: (r) => r.params[0]!,
  persist: (r) => {
    const [end, count, debt] = ['qend', 'count', 'qdebt'].map(r.v) as [string, string, string]
    return `if ${count} > 0 then
  local value = num(${end}) .. ':' .. num(${count})
  if ${debt} > 0 then value = value .. ':' .. num(${debt}) end
  redis.call('SET', ${r.key}, value, 'PX', ${quotaWhole(r)})
else redis.call('DEL', ${r.key}) end
`
  },
  used: (r) => r.v('count'),
  limit: (r) => r.params[0]!,
}

/** A Lua expression: the end of the period after the stored one (E's is N; any other, the period's length again). */
function quotaAfter(r: LuaRule): string {
  const [, S, E, N] = r.params as [string, string, string, string]
  const end = r.v('qend')
  return `(${end} == ${S} and ${E} or (${end} == ${E} and ${N} or ${end} + (${N} - ${E})))`
}

/** A Lua expression: the wait until `cost` fits (`quotaLogic`'s `waitFor`). */
function quotaWait(r: LuaRule, cost: string): string {
  const L = r.params[0]!
  return `((math.min(${r.v('qdebt')}, ${L}) + ${cost} <= ${L}) and ${r.v('qend')} or ${quotaAfter(r)}) - now`
}

/** A Lua expression: the wait until the whole quota is back (`quotaLogic`'s `whole`). */
function quotaWhole(r: LuaRule): string {
  return `((${r.v('qdebt')} > 0) and ${quotaAfter(r)} or ${r.v('qend')}) - now`
}

/** @internal */
export const QUOTA: AlgorithmDefinition = {
  name: 'quota',
  code: CODE,
  lua: LUA,
}
