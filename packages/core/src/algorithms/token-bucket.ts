import { type Duration, formatDuration, parseDuration } from '../support/duration.js'
import { requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import {
  checkProduct,
  makeRule,
  parseCount,
  parseRuleName,
  parseShadow,
  scaledBurst,
  warnAtOf,
} from './rule.js'
import type { AlgorithmLogic, LuaTwin, Rule, WindowAlgorithmDefinition } from './types.js'

export interface TokenBucketOptions {
  /** Most tokens the bucket holds: the largest burst. A positive whole number. */
  capacity: number
  /** Tokens added per `interval`, continuously (not in steps). A positive whole number. */
  refillRate: number
  /** The period of `refillRate`. @default '1s' */
  interval?: Duration
  /** Policy name for draft-8 headers. @default `'<capacity>-per-<time to fill>'` */
  name?: string
  /** Count and report, but never refuse (docs/rollout.md); `false` enforces. @default false */
  shadow?: boolean
  /** A soft limit: the share of the limit at which the key is said to be near it (`Rule.warnAt`). */
  warnAt?: number
}

/**
 * Tokens, scaled by `interval` so that refill stays in whole numbers: one token is `interval` units and the
 * bucket gains `refillRate` units per millisecond.
 */
interface TokenBucketState {
  tokens: number
  /** Time of the last refill (ms); NaN for a bucket never seen, which starts full. */
  last: number
  /** Last time the bucket was seen full (ms): a refund of a request made before it gives nothing back. */
  fullAt: number
}

const CODE = 4

const TOKEN_BUCKET_OPTIONS = namesOf<TokenBucketOptions>({
  capacity: true,
  refillRate: true,
  interval: true,
  name: true,
  shadow: true,
  warnAt: true,
})

/**
 * Token bucket: bursts up to `capacity`, sustained `refillRate` per `interval`. O(1) memory. Beyond the
 * reference articles: use it when clients should be able to burst and then continue at an average rate.
 * @example tokenBucket({ capacity: 20, refillRate: 5, interval: '1s' }) // bursts of 20, then 5/s
 */
export function tokenBucket(options: TokenBucketOptions): Rule {
  return tokenBucketRule(options, undefined)
}

/** `tokenBucket`, under the storage id `id` when given (an overridden rule keeps the coded rule's id). */
function tokenBucketRule(options: TokenBucketOptions, id: string | undefined): Rule {
  requireObject(options, 'token-bucket', '{ capacity: 20, refillRate: 5 }')
  rejectUnknownOptions(options, TOKEN_BUCKET_OPTIONS, 'token-bucket rule')
  const capacity = parseCount(options.capacity, 'capacity')
  const refillRate = parseCount(options.refillRate, 'refillRate')
  const intervalMs = options.interval === undefined ? 1000 : parseDuration(options.interval, 'interval')
  checkProduct(capacity, intervalMs, '`capacity` × `interval` (ms)')
  checkProduct(refillRate, intervalMs, '`refillRate` × `interval` (ms)')
  const fillMs = Math.ceil((capacity * intervalMs) / refillRate)
  const ruleId = id ?? `tb${capacity}-${refillRate}-${intervalMs}`
  return makeRule(
    {
      algorithm: 'token-bucket',
      limit: capacity,
      windowMs: fillMs,
      name: parseRuleName(options.name, `${capacity}-per-${formatDuration(fillMs)}`),
      id: ruleId,
      maxCost: capacity,
      shadow: parseShadow(options.shadow),
      ...warnAtOf(options.warnAt),
      logic: tokenBucketLogic(capacity, refillRate, intervalMs),
      script: Object.freeze({
        code: CODE,
        params: Object.freeze([capacity, refillRate, intervalMs] as const),
      }),
    },
    // An override sets the rate (`limit`: the refill per the same interval) and the burst (the capacity).
    (newLimit, newBurst) =>
      tokenBucketRule(
        {
          capacity: newBurst ?? scaledBurst(capacity, refillRate, newLimit),
          refillRate: newLimit,
          interval: intervalMs,
          name: options.name,
          shadow: options.shadow,
          warnAt: options.warnAt,
        },
        ruleId,
      ),
  )
}

function tokenBucketLogic(
  capacity: number,
  refillRate: number,
  intervalMs: number,
): AlgorithmLogic<TokenBucketState> {
  const full = capacity * intervalMs
  const untilFull = (tokens: number) => Math.ceil((full - tokens) / refillRate)
  /**
   * With slots reserved ahead (the tokens below zero), whether the slot at `at` is the last one reserved: the
   * level the bucket reaches at `at` is within one millisecond of refill of empty, as a reservation leaves it
   * (see `reserve`); one reserved after it takes at least a token more. One number cannot hold a gap: an earlier
   * slot given back stays empty, so that no caller is given a slot a waiter still holds. Never when a
   * token refills in under a millisecond.
   */
  const lastReserved = (tokens: number, now: number, at: number) => {
    const level = tokens + (at - now) * refillRate
    return refillRate <= intervalMs && level >= 0 && level < refillRate
  }
  return {
    lastSlotOnly: true,
    create: () => ({ tokens: full, last: Number.NaN, fullAt: Number.NaN }),
    advance(state, now) {
      if (Number.isNaN(state.last)) {
        state.tokens = full
        state.last = now
        state.fullAt = now
        return
      }
      const elapsed = now - state.last
      if (elapsed <= 0) return
      // Compare before multiplying so that a long idle time cannot overflow exact integers.
      state.tokens = elapsed >= untilFull(state.tokens) ? full : state.tokens + elapsed * refillRate
      state.last = now
      if (state.tokens === full) state.fullAt = now
    },
    fits: (state, _now, cost) => state.tokens >= cost * intervalMs,
    consume(state, _now, cost) {
      state.tokens -= cost * intervalMs
    },
    wait: (state, _now, cost) => Math.max(0, Math.ceil((cost * intervalMs - state.tokens) / refillRate)),
    // The tokens go below zero: the bucket owes them until they have refilled. Charged now, as the level at `at`
    // the bucket would reach then (never above full: a refill past the capacity is lost), minus the cost. Where
    // another rule chose a later slot than this one needs, the level left at `at` is given up too, down to one
    // millisecond of refill: then the level at a reserved slot tells whether it is the last one (`refund`).
    reserve(state, now, at, cost) {
      const refill = (at - now) * refillRate
      state.tokens =
        Math.min(state.tokens, full - refill, refillRate - 1 - refill + cost * intervalMs) - cost * intervalMs
    },
    refund(state, now, cost, at) {
      // A bucket that has been full since the request already refilled its tokens: refunding them again
      // would hold more than `capacity` at once.
      if (at < state.fullAt) return
      // Tokens owed (slots reserved ahead, or a settle's debt): only the last slot reserved gives its tokens back.
      if (state.tokens < 0 && !lastReserved(state.tokens, now, at)) return
      state.tokens = Math.min(full, state.tokens + cost * intervalMs)
    },
    report(state, _now, pending, deniedCost, into, i) {
      const tokens = state.tokens - pending * intervalMs
      const missing = deniedCost * intervalMs - tokens
      // Below 0 only while reserved slots or a settle's debt are owed.
      into.remaining[i] = Math.max(0, Math.floor(tokens / intervalMs))
      into.reset[i] = untilFull(tokens)
      into.retryAfter[i] = missing > 0 ? Math.ceil(missing / refillRate) : 0
    },
    ttl: (state) => untilFull(state.tokens),
    // `limit − remaining` unclamped: more than the capacity while tokens are owed.
    used: (state) => Math.ceil((full - state.tokens) / intervalMs),
    adopt(state, [fromCapacity, fromRate], now) {
      if (Number.isNaN(state.last)) return
      // Refilled to now at the rate it was kept under, then the units used carried over (an override keeps the
      // interval, so the scaled units are the same): below zero when more is used than this bucket holds.
      const fromFull = fromCapacity! * intervalMs
      const elapsed = now - state.last
      if (elapsed > 0) {
        const refill = elapsed >= Math.ceil((fromFull - state.tokens) / fromRate!)
        state.tokens = refill ? fromFull : state.tokens + elapsed * fromRate!
        state.last = now
      }
      state.tokens = full - (fromFull - state.tokens)
      if (state.tokens >= full) {
        state.tokens = full
        state.fullAt = now
      }
    },
  }
}

/**
 * Lua twin of `tokenBucketLogic`. Key: a string `"<scaled tokens>:<last refill ms>:<last full ms>"` with its
 * TTL (the tokens are below zero while reserved slots or a settle's debt are owed) (`"<tokens>:<last>"` from version 1 reads as full at `last`). Another type or content marks the state
 * `broken`: the script deletes the key and starts afresh. From here on the capacity parameter holds the full
 * bucket in scaled units (capacity × interval).
 */
const LUA: LuaTwin = {
  params: 3,
  state: ['tokens', 'last', 'fullAt', 'broken'],
  load: (r) => {
    const [full, rate, interval] = r.params
    const [tokens, last, fullAt] = ['tokens', 'last', 'fullAt'].map(r.v)
    return `${full} = ${full} * ${interval}
${tokens}, ${last}, ${fullAt} = ${full}, now, now
do
  local raw = redis.pcall('GET', ${r.key})
  if raw then
    local t, l, f
    if type(raw) == 'string' then
      t, l, f = string.match(raw, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
      if not t then
        t, l = string.match(raw, '^(%d+):(%-?%d+)$')
        f = l
      end
    end
    if not t or tonumber(t) > ${full} then
      ${r.v('broken')} = true
    else
      ${tokens}, ${last}, ${fullAt} = tonumber(t), tonumber(l), tonumber(f)
      local elapsed = now - ${last}
      if elapsed > 0 then
        if elapsed >= math.ceil((${full} - ${tokens}) / ${rate}) then ${tokens} = ${full} else ${tokens} = ${tokens} + elapsed * ${rate} end
        ${last} = now
        if ${tokens} == ${full} then ${fullAt} = now end
      end
    end
  end
end
`
  },
  fits: (r, cost) => `${r.v('tokens')} >= ${cost} * ${r.params[2]}`,
  consume: (r, cost) => `${r.v('tokens')} = ${r.v('tokens')} - ${cost} * ${r.params[2]}
`,
  wait: (r, cost) => {
    const [, rate, interval] = r.params
    return `w = math.max(w, math.ceil((${cost} * ${interval} - ${r.v('tokens')}) / ${rate}))
`
  },
  reserve: (r, cost, at) => {
    const [full, rate, interval] = r.params
    const tokens = r.v('tokens')
    return `do
  local refill = (${at} - now) * ${rate}
  ${tokens} = math.min(${tokens}, ${full} - refill, ${rate} - 1 - refill + ${cost} * ${interval}) - ${cost} * ${interval}
end
`
  },
  refund: (r, cost, at) => {
    const [full, rate, interval] = r.params
    const tokens = r.v('tokens')
    return `if ${at} >= ${r.v('fullAt')} then
  local level = ${tokens} + (${at} - now) * ${rate}
  -- Reserved ahead: only the last slot reserved gives its tokens back.
  if ${tokens} >= 0 or (${rate} <= ${interval} and level >= 0 and level < ${rate}) then
    ${tokens} = math.min(${full}, ${tokens} + ${cost} * ${interval})
  end
end
`
  },
  report: (r, pending, denied) => {
    const [full, rate, interval] = r.params
    const tokens = r.v('tokens')
    return `do
  local tokens = ${tokens} - ${pending} * ${interval}
  local missing = ${denied} * ${interval} - ${tokens}
  remaining, reset, retry = math.max(0, math.floor(tokens / ${interval})), math.ceil((${full} - tokens) / ${rate}), 0
  if missing > 0 then retry = math.ceil(missing / ${rate}) end
end
`
  },
  persist: (r) => {
    const [full, rate] = r.params
    const [tokens, last, fullAt] = ['tokens', 'last', 'fullAt'].map(r.v)
    return `do
  local ttl = math.ceil((${full} - ${tokens}) / ${rate})
  if ttl > 0 then redis.call('SET', ${r.key}, num(${tokens}) .. ':' .. num(${last}) .. ':' .. num(${fullAt}), 'PX', num(ttl))
  else redis.call('DEL', ${r.key}) end
end
`
  },
  used: (r) => `math.ceil((${r.params[0]} - ${r.v('tokens')}) / ${r.params[2]})`,
  limit: (r) => `${r.params[0]} / ${r.params[2]}`,
}

/** @internal */
export const TOKEN_BUCKET: WindowAlgorithmDefinition = {
  name: 'token-bucket',
  code: CODE,
  lua: LUA,
  fromLimit: (limit, window) => tokenBucket({ capacity: limit, refillRate: limit, interval: window }),
}
