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

/** The state of a quota: the end of the period it counts in (epoch ms), and the units counted. */
interface QuotaState {
  end: number
  count: number
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
  const { unit, timeZone, anchor } = calendar
  const periods = new CalendarPeriods(unit, parseTimeZone(timeZone), anchor)
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
  /** The end of the period after the one that ends at `end`. */
  /**
   * The end of the period after the one that ends at `end`: the period holding `now` knows it (`next`), without
   * moving the one period the calendar keeps (a flood of costly denials computes nothing).
   */
  const after = (end: number, now: number) => {
    const current = periods.at(now)
    return current.end === end ? current.next : periods.at(end).end
  }
  const waitFor = (state: QuotaState, now: number, count: number, cost: number) =>
    (count - limit + cost <= limit ? state.end : after(state.end, now)) - now
  return {
    create: () => ({ end: 0, count: 0 }),
    advance(state, now) {
      // NOTE: only forward: a period whose end is still ahead stays, whoever computed it (another process's tzdata).
      if (now < state.end) return
      const period = periods.at(now)
      // Units beyond the limit (a debt) carry into the period that follows, and only into it.
      state.count = state.end === period.start ? Math.max(0, state.count - limit) : 0
      state.end = period.end
    },
    fits: (state, _now, cost) => state.count + cost <= limit,
    consume(state, _now, cost) {
      state.count += cost
    },
    carriedDebt: limit,
    refund(state, _now, cost, at) {
      if (at < state.end && periods.at(at).end === state.end) state.count = Math.max(0, state.count - cost)
    },
    report(state, now, pending, deniedCost, into, i) {
      const count = state.count + pending
      into.remaining[i] = Math.max(0, limit - count)
      into.reset[i] = count > 0 ? waitFor(state, now, count, limit) : 0
      into.retryAfter[i] = count + deniedCost > limit ? waitFor(state, now, count, deniedCost) : 0
    },
    ttl: (state, now) => (state.count > 0 ? waitFor(state, now, state.count, limit) : 0),
    used: (state) => state.count,
  }
}

/**
 * Lua twin of `quotaLogic`. Key: a string `"<period end>:<count>"` with its TTL, the end of the period (or of the
 * one after, while a debt carries into it). Parameters: the limit, then the bounds the deciding process computed
 * (`quotaBounds`): the start S and end E of the period holding its `now`, and the end N of the one after. A state
 * whose end has passed takes the period holding the store's `now` among those: [.., S), [S, E) or [E, N).
 */
const LUA: LuaTwin = {
  params: 4,
  state: ['qend', 'count', 'broken'],
  load: (r) => {
    const [L, S, E, N] = r.params
    const [end, count] = ['qend', 'count'].map(r.v)
    return `${end}, ${count} = 0, 0
do
  local raw = redis.pcall('GET', ${r.key})
  if raw then
    local e, c
    if type(raw) == 'string' then e, c = string.match(raw, '^(%d+):(%d+)$') end
    if not e then ${r.v('broken')} = true else ${end}, ${count} = tonumber(e), tonumber(c) end
  end
  if now >= ${end} then
    local start, finish = -1, ${N}
    if now < ${S} then finish = ${S}
    elseif now < ${E} then start, finish = ${S}, ${E}
    else start = ${E} end
    if ${end} == start then ${count} = math.max(0, ${count} - ${L}) else ${count} = 0 end
    ${end} = finish
  end
end
`
  },
  fits: (r, cost) => `${r.v('count')} + ${cost} <= ${r.params[0]}`,
  consume: (r, cost) => `${r.v('count')} = ${r.v('count')} + ${cost}
`,
  refund: (r, cost, at) => {
    const [, S, E, N] = r.params
    const end = r.v('qend')
    return `if ${at} < ${end} and ((${at} >= ${S} and ${at} < ${E} and ${end} == ${E}) or (${at} >= ${E} and ${at} < ${N} and ${end} == ${N})) then ${r.v('count')} = math.max(0, ${r.v('count')} - ${cost}) end
`
  },
  report: (r, pending, denied) => {
    const L = r.params[0]!
    const count = r.v('count')
    return `do
  local count = ${count} + ${pending}
  remaining, reset, retry = math.max(0, ${L} - count), 0, 0
  if count > 0 then reset = ${quotaWait(r, 'count', L)} end
  if count + ${denied} > ${L} then retry = ${quotaWait(r, 'count', denied)} end
end
`
  },
  carriedDebt: (r) => r.params[0]!,
  persist: (r) => {
    const count = r.v('count')
    return `if ${count} > 0 then redis.call('SET', ${r.key}, num(${r.v('qend')}) .. ':' .. num(${count}), 'PX', ${quotaWait(r, count, r.params[0]!)})
else redis.call('DEL', ${r.key}) end
`
  },
  used: (r) => r.v('count'),
  limit: (r) => r.params[0]!,
}

/**
 * A Lua expression: the wait until `cost` fits after `count` (`quotaLogic`'s `waitFor`): the period's end, or the
 * end of the one after while a debt carries into it (E's period ends at N; any other end, the period's length again).
 */
function quotaWait(r: LuaRule, count: string, cost: string): string {
  const [L, S, E, N] = r.params as [string, string, string, string]
  const end = r.v('qend')
  return `((${count} - ${L} + ${cost} <= ${L}) and ${end} or (${end} == ${S} and ${E} or (${end} == ${E} and ${N} or ${end} + (${N} - ${E})))) - now`
}

/** @internal */
export const QUOTA: AlgorithmDefinition = {
  name: 'quota',
  code: CODE,
  lua: LUA,
}
