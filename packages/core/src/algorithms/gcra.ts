import { type Duration, formatDuration, parseDuration } from '../support/duration.js'
import { invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { makeRule, parseCount, parseRuleName, parseShadow, scaledBurst, warnAtOf } from './rule.js'
import type { AlgorithmLogic, LuaTwin, Rule, WindowAlgorithmDefinition } from './types.js'

export interface GcraOptions {
  /** Requests (cost units) admitted per `window`, evenly spaced: the sustained rate. A positive whole number. */
  limit: number
  /** The period of `limit`: milliseconds or `'1s' | '1m' | …`. */
  window: Duration
  /** Most requests admitted at once after an idle time: the burst. A positive whole number. @default limit */
  burst?: number
  /** Policy name for draft-8 headers. @default `'<limit>-per-<window>'` */
  name?: string
  /** Count and report, but never refuse (docs/rollout.md); `false` enforces. @default false */
  shadow?: boolean
  /** A soft limit: the share of the limit at which the key is said to be near it (`Rule.warnAt`). */
  warnAt?: number
}

/**
 * The theoretical arrival time (TAT), the only state: the time at which the key would be fully rested again.
 * Stored in "ticks" of `1 / scale` ms, where `scale` is the smallest whole number making the emission
 * interval (`window / limit` ms) whole, so that every step is exact integer arithmetic.
 */
interface GcraState {
  /** Theoretical arrival time in ticks; -Infinity for a key never seen (fully rested). */
  tat: number
}

const CODE = 5

const GCRA_OPTIONS = namesOf<GcraOptions>({
  limit: true,
  window: true,
  burst: true,
  name: true,
  shadow: true,
  warnAt: true,
})
/**
 * Ticks must stay exact in IEEE doubles (JavaScript and Redis Lua) for any epoch time until the year 2248
 * (2^43 ms): `scale` × 2^43 plus a burst below 2^53.
 */
const MAX_EPOCH_MS = 2 ** 43
const MAX_TICKS = 2 ** 53

/**
 * GCRA, the generic cell rate algorithm: requests spaced `window / limit` apart on average, with up to `burst`
 * at once. One integer per key (the theoretical arrival time) and exact waits: a denied request is told to
 * the millisecond when it passes. It admits what a token bucket of capacity `burst` refilling `limit` per
 * `window` admits, with a smaller state.
 * @example gcra({ limit: 10, window: '1s', burst: 20 }) // 10 per second on average, bursts of 20
 */
export function gcra(options: GcraOptions): Rule {
  return gcraRule(options, undefined)
}

/** `gcra`, under the storage id `id` when given (an overridden rule keeps the coded rule's id). */
function gcraRule(options: GcraOptions, id: string | undefined): Rule {
  requireObject(options, 'gcra', '{ limit: 10, window: "1s", burst: 20 }')
  rejectUnknownOptions(options, GCRA_OPTIONS, 'gcra rule')
  const limit = parseCount(options.limit, 'limit')
  const windowMs = parseDuration(options.window, 'window')
  const burst = options.burst === undefined ? limit : parseCount(options.burst, 'burst')
  // Emission interval window / limit ms = (window / g) / (limit / g): ticks of 1 / scale ms make it whole.
  const g = gcd(limit, windowMs)
  const scale = limit / g
  const interval = windowMs / g
  if (scale * MAX_EPOCH_MS + burst * interval > MAX_TICKS) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `gcra \`limit\` ${limit} per \`window\` ${windowMs} ms spaces requests ${windowMs}/${limit} ms apart, a fraction too fine to stay exact (denominator ${scale}, at most ${Math.floor((MAX_TICKS - burst * interval) / MAX_EPOCH_MS)}). Choose a window that ${limit} divides more evenly, e.g. ${Math.round(windowMs / limit) * limit} ms.`,
      { option: 'limit' },
    )
  }
  if (burst * windowMs > 2 ** 50) {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'burst', burst, 'a burst with burst × window below 2^50')
  }
  // The time to rest fully from an exhausted burst, for draft-8 policy names and `windowMs`.
  const restMs = Math.ceil((burst * interval) / scale)
  const ruleId = id ?? `gc${limit}-${windowMs}-${burst}`
  return makeRule(
    {
      algorithm: 'gcra',
      limit: burst,
      windowMs: restMs,
      name: parseRuleName(options.name, `${limit}-per-${formatDuration(windowMs)}`),
      id: ruleId,
      maxCost: burst,
      logic: gcraLogic(scale, interval, burst),
      script: Object.freeze({ code: CODE, params: Object.freeze([scale, interval, burst] as const) }),
      shadow: parseShadow(options.shadow),
      ...warnAtOf(options.warnAt),
    },
    // An override sets the rate (`limit` per the same window) and the burst.
    (newLimit, newBurst) =>
      gcraRule(
        {
          limit: newLimit,
          window: windowMs,
          burst: newBurst ?? scaledBurst(burst, limit, newLimit),
          name: options.name,
          shadow: options.shadow,
          warnAt: options.warnAt,
        },
        ruleId,
      ),
  )
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b]
  return a
}

/**
 * The decision over ticks: `now` is `now × scale`; a request of `cost` moves the TAT `cost × interval` on from
 * `max(tat, now)`, and passes when the new TAT is at most `burst × interval` ahead of now.
 */
function gcraLogic(scale: number, interval: number, burst: number): AlgorithmLogic<GcraState> {
  const tolerance = burst * interval
  /** Ticks → whole ms, rounded up: a wait is never reported shorter than it is. */
  const toMs = (ticks: number) => Math.ceil(ticks / scale)
  /** How far the TAT is ahead of now, in ticks (0 for a rested key). */
  const ahead = (state: GcraState, now: number) => Math.max(0, state.tat - now * scale)
  /**
   * Whether the slot reserved at `at` (ms) is the last one reserved: the TAT still ends within the millisecond a
   * reservation at `at` leaves it in (see `reserve`), where no other slot can end (one reserved after it ends at
   * least one interval later). Never when an interval is under a millisecond: there, two slots could end in it.
   */
  const lastReserved = (tat: number, at: number) =>
    interval >= scale && tat > (at - 1) * scale + tolerance && tat <= at * scale + tolerance
  return {
    lastSlotOnly: true,
    create: () => ({ tat: Number.NEGATIVE_INFINITY }),
    // Nothing to bring forward: the TAT is absolute. A clock stepping back sees it further ahead, never reset.
    advance() {},
    fits: (state, now, cost) => ahead(state, now) + cost * interval <= tolerance,
    consume(state, now, cost) {
      state.tat = now * scale + ahead(state, now) + cost * interval
    },
    // The request may go once the TAT it would set is at most the tolerance ahead.
    wait: (state, now, cost) => Math.max(0, toMs(ahead(state, now) + cost * interval - tolerance)),
    // Virtual scheduling at `at`: exact, and what a request arriving at `at` would have set. Where another rule
    // chose a later slot than this one needs, the room left at `at` is taken too, down to its last millisecond:
    // then the TAT after any reservation tells which slot it ended with (`lastReserved`).
    reserve(state, _now, at, cost) {
      state.tat = Math.max(
        Math.max(state.tat, at * scale) + cost * interval,
        (at - 1) * scale + tolerance + 1,
      )
    },
    refund(state, now, cost, at) {
      // A request's units are surely rested once the TAT it set has passed; that TAT was at most a whole
      // burst ahead of `at`. After that, or when the TAT is not ahead of the request at all, nothing is owed.
      // NOTE: one integer cannot tell whether the key rested in between and was used again; such a refund,
      // within one burst time of the request, gives back up to `cost` units already rested.
      if (state.tat <= at * scale || now * scale >= at * scale + tolerance) return
      if (state.tat - now * scale > tolerance) {
        // Slots are reserved ahead (nothing else takes the TAT past the tolerance). One integer cannot hold a
        // gap: only the last slot reserved moves the TAT back; an earlier one stays empty, so that no caller is
        // ever given a slot a waiter still holds.
        if (lastReserved(state.tat, at)) state.tat -= cost * interval
        return
      }
      state.tat = Math.max(now * scale, at * scale, state.tat - cost * interval)
    },
    report(state, now, pending, deniedCost, into, i) {
      const used = ahead(state, now) + pending * interval
      const missing = used + deniedCost * interval - tolerance
      // Below 0 only while reserved slots or a settle's debt hold the TAT past the tolerance.
      into.remaining[i] = Math.max(0, Math.floor((tolerance - used) / interval))
      into.reset[i] = toMs(used)
      into.retryAfter[i] = missing > 0 ? toMs(missing) : 0
    },
    ttl: (state, now) => toMs(ahead(state, now)),
    // `limit − remaining` unclamped: more than the burst while the TAT is past the tolerance.
    used: (state, now) => Math.ceil(ahead(state, now) / interval),
    adopt(state, [fromScale, fromInterval], now) {
      const used = Math.max(0, state.tat - now * fromScale!)
      // The units used, `used / fromInterval`, in this rule's ticks, rounded up (exact: BigInt).
      state.tat =
        used === 0 || !Number.isFinite(used)
          ? Number.NEGATIVE_INFINITY
          : now * scale + ceilRatio(used, interval, fromInterval!)
    },
  }
}

/** `ceil(a × b / c)` for whole numbers, exact past 2^53. */
function ceilRatio(a: number, b: number, c: number): number {
  const product = BigInt(a) * BigInt(b)
  const divisor = BigInt(c)
  return Number((product + divisor - 1n) / divisor)
}

/**
 * Lua twin of `gcraLogic`. Key: a string holding the TAT in ticks, with a TTL equal to its distance from now.
 * Another type or content marks the state `broken`: the script deletes the key and starts afresh. From here on
 * the burst parameter holds the tolerance in ticks (burst × interval).
 */
const LUA: LuaTwin = {
  params: 3,
  state: ['tat', 'ahead', 'broken'],
  load: (r) => {
    const [scale, interval, tolerance] = r.params
    const [tat, ahead] = ['tat', 'ahead'].map(r.v)
    return `${tolerance} = ${tolerance} * ${interval}
${tat} = -1
do
  local raw = redis.pcall('GET', ${r.key})
  if raw then
    local t
    if type(raw) == 'string' then t = string.match(raw, '^(%d+)$') end
    if not t then ${r.v('broken')} = true else ${tat} = tonumber(t) end
  end
end
${ahead} = math.max(0, ${tat} - now * ${scale})
`
  },
  fits: (r, cost) => `${r.v('ahead')} + ${cost} * ${r.params[1]} <= ${r.params[2]}`,
  consume: (r, cost) => {
    const [scale, interval] = r.params
    const [tat, ahead] = ['tat', 'ahead'].map(r.v)
    return `${tat} = now * ${scale} + ${ahead} + ${cost} * ${interval}
${ahead} = ${tat} - now * ${scale}
`
  },
  wait: (r, cost) => {
    const [scale, interval, tolerance] = r.params
    return `w = math.max(w, math.ceil((${r.v('ahead')} + ${cost} * ${interval} - ${tolerance}) / ${scale}))
`
  },
  reserve: (r, cost, at) => {
    const [scale, interval, tolerance] = r.params
    const [tat, ahead] = ['tat', 'ahead'].map(r.v)
    return `${tat} = math.max(math.max(${tat}, ${at} * ${scale}) + ${cost} * ${interval}, (${at} - 1) * ${scale} + ${tolerance} + 1)
${ahead} = ${tat} - now * ${scale}
`
  },
  refund: (r, cost, at) => {
    const [scale, interval, tolerance] = r.params
    const [tat, ahead] = ['tat', 'ahead'].map(r.v)
    return `if not (${tat} <= ${at} * ${scale} or now * ${scale} >= ${at} * ${scale} + ${tolerance}) then
  if ${tat} - now * ${scale} > ${tolerance} then
    -- Reserved ahead: only the last slot reserved moves the TAT back.
    if ${interval} >= ${scale} and ${tat} > (${at} - 1) * ${scale} + ${tolerance} and ${tat} <= ${at} * ${scale} + ${tolerance} then
      ${tat} = ${tat} - ${cost} * ${interval}
    end
  else
    ${tat} = math.max(now * ${scale}, ${at} * ${scale}, ${tat} - ${cost} * ${interval})
  end
  ${ahead} = math.max(0, ${tat} - now * ${scale})
end
`
  },
  report: (r, pending, denied) => {
    const [scale, interval, tolerance] = r.params
    return `do
  local used = ${r.v('ahead')} + ${pending} * ${interval}
  local missing = used + ${denied} * ${interval} - ${tolerance}
  remaining, reset, retry = math.max(0, math.floor((${tolerance} - used) / ${interval})), math.ceil(used / ${scale}), 0
  if missing > 0 then retry = math.ceil(missing / ${scale}) end
end
`
  },
  persist: (r) => `do
  local ttl = math.ceil(${r.v('ahead')} / ${r.params[0]})
  if ttl > 0 then redis.call('SET', ${r.key}, num(${r.v('tat')}), 'PX', num(ttl)) else redis.call('DEL', ${r.key}) end
end
`,
  used: (r) => `math.ceil(${r.v('ahead')} / ${r.params[1]})`,
  limit: (r) => `${r.params[2]} / ${r.params[1]}`,
}

/** @internal */
export const GCRA: WindowAlgorithmDefinition = {
  name: 'gcra',
  code: CODE,
  lua: LUA,
  fromLimit: (limit, window) => gcra({ limit, window }),
}
