import { type Duration, parseDuration } from '../support/duration.js'
import { invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { wholeNumber } from '../support/validators.js'

/**
 * Penalties: after `after` denials within `within`, the key is blocked for `block`, each repeat `factor` times
 * longer up to `maxBlock`. Kept by the store beside the rule state and decided in the same atomic step.
 */
export interface PenaltyOptions {
  /** Denials (by the rules) that trigger a block. A positive whole number. */
  after: number
  /** The period the denials are counted in, from the first one. */
  within: Duration
  /** How long a key is blocked: every request is denied, whatever the rules say. */
  block: Duration
  /**
   * Each block that follows another within as long as that block lasted (after it ended) is `factor` times
   * longer. A whole number >= 1. @default 1 (no escalation)
   */
  factor?: number
  /** The longest block. @default `block` when `factor` is 1, otherwise 1 day (or `block`, if longer) */
  maxBlock?: Duration
  /** HTTP status for requests denied by a block (adapters only). @default the middleware's `statusCode` */
  statusCode?: number
}

/** Internal: A parsed penalty: whole numbers, the same in TypeScript and Lua. */
export interface Penalty {
  readonly after: number
  readonly within: number
  readonly block: number
  readonly factor: number
  readonly maxBlock: number
  readonly statusCode: number | undefined
}

/** @internal The state of a key's penalty. */
export interface PenaltyState {
  /** Denials counted since `since`. */
  count: number
  since: number
  /** Blocked until this time (ms); 0 when never blocked. */
  until: number
  /** How many blocks in a row (0: none remembered). */
  level: number
}

const DAY = 86_400_000
/** Levels above this change nothing (2^40 ms is 35 years): it keeps `factor^level` finite. */
const MAX_LEVEL = 40

const PENALTY_OPTIONS = namesOf<PenaltyOptions>({
  after: true,
  within: true,
  block: true,
  factor: true,
  maxBlock: true,
  statusCode: true,
})
/** `PenaltyOptions`' defaults, in one place (the `@default` tags above say the same). */
export const PENALTY_DEFAULTS = { factor: 1 } as const satisfies Partial<PenaltyOptions>

/** Validates the `penalty` option. */
export function parsePenalty(options: unknown): Penalty | undefined {
  if (options === undefined || options === false) return undefined
  requireObject(options, 'penalty', "{ after: 5, within: '1m', block: '15m' }")
  rejectUnknownOptions(options, PENALTY_OPTIONS, '`penalty`')
  const {
    after,
    within,
    block,
    factor = PENALTY_DEFAULTS.factor,
    maxBlock,
    statusCode,
  } = options as PenaltyOptions
  wholeNumber(after, 'penalty.after', { min: 1, allowed: 'a positive whole number such as 5' })
  const withinMs = parseDuration(within, 'penalty.within')
  const blockMs = parseDuration(block, 'penalty.block')
  if (typeof factor !== 'number' || !Number.isSafeInteger(factor) || factor < 1 || factor > 1_000)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'penalty.factor', factor, 'a whole number from 1 to 1000')
  const maxBlockMs =
    maxBlock === undefined
      ? factor === 1
        ? blockMs
        : Math.max(blockMs, DAY)
      : parseDuration(maxBlock, 'penalty.maxBlock')
  if (maxBlockMs < blockMs) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`penalty.maxBlock\` (${maxBlockMs} ms) is shorter than \`penalty.block\` (${blockMs} ms); raise it or shorten the block.`,
      { option: 'penalty.maxBlock' },
    )
  }
  if (maxBlockMs > 2 ** 40 || withinMs > 2 ** 40)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'penalty.maxBlock', maxBlock, 'at most about 35 years')
  if (statusCode !== undefined && (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'penalty.statusCode',
      statusCode,
      'an HTTP error status from 400 to 599',
    )
  }
  return Object.freeze({
    after,
    within: withinMs,
    block: blockMs,
    factor,
    maxBlock: maxBlockMs,
    statusCode,
  })
}

/** @internal The penalty state of a key never seen. */
export function freshPenalty(): PenaltyState {
  return { count: 0, since: 0, until: 0, level: 0 }
}

/** The length of the block at `level` (1 for the first): `block × factor^(level − 1)`, at most `maxBlock`. */
function blockAt(penalty: Penalty, level: number): number {
  let ms = penalty.block
  for (let i = 1; i < level && ms < penalty.maxBlock; i++) ms *= penalty.factor
  return Math.min(ms, penalty.maxBlock)
}

/** @internal How long the key stays blocked from `now` (0 when it is not). */
export function blockedFor(state: PenaltyState, now: number): number {
  return Math.max(0, state.until - now)
}

/**
 * @internal Records a denial by the rules at `now`; returns how long the key is blocked from now on (0 when
 * this denial did not start a block). Denials while blocked are not counted: the caller does not call it then.
 */
export function recordDenial(penalty: Penalty, state: PenaltyState, now: number): number {
  // A remembered level lapses once the key has behaved for as long as its last block lasted.
  if (state.level > 0 && now >= state.until + blockAt(penalty, state.level)) state.level = 0
  if (state.count === 0 || now - state.since >= penalty.within || now < state.since) {
    state.count = 0
    state.since = now
  }
  state.count++
  if (state.count < penalty.after) return 0
  state.level = Math.min(state.level + 1, MAX_LEVEL)
  state.until = now + blockAt(penalty, state.level)
  state.count = 0
  return state.until - now
}

/** @internal How long the penalty state matters from `now`; 0 when it equals a fresh one. */
export function penaltyTtl(penalty: Penalty, state: PenaltyState, now: number): number {
  const counting = state.count > 0 ? state.since + penalty.within - now : 0
  const remembered = state.level > 0 ? state.until + blockAt(penalty, state.level) - now : 0
  return Math.max(0, counting, remembered)
}

/**
 * @internal Lua twin of the functions above, for the decision script. Key: a string
 * `"<count>:<since>:<until>:<level>"` with its TTL; anything else reads as a fresh state (and is rewritten).
 * `P` holds the parameters: after, within, block, factor, maxBlock.
 */
export const PENALTY_LUA = `
local function blockAt(P, level)
  local ms = P.block
  local i = 1
  while i < level and ms < P.maxBlock do ms = ms * P.factor; i = i + 1 end
  return math.min(ms, P.maxBlock)
end
local function loadPenalty(key)
  local pen = { key = key, count = 0, since = 0, ['until'] = 0, level = 0 }
  local raw, broken = read('GET', key)
  pen.loaded = raw ~= nil
  if raw then
    local c, s, u, l = string.match(raw, '^(%d+):(%-?%d+):(%d+):(%d+)$')
    if c then
      pen.count, pen.since, pen['until'], pen.level = tonumber(c), tonumber(s), tonumber(u), tonumber(l)
    else
      broken = true
    end
  end
  pen.broken = broken
  return pen
end
local function recordDenial(P, pen, now)
  if pen.level > 0 and now >= pen['until'] + blockAt(P, pen.level) then pen.level = 0 end
  if pen.count == 0 or now - pen.since >= P.within or now < pen.since then
    pen.count = 0
    pen.since = now
  end
  pen.count = pen.count + 1
  if pen.count < P.after then return 0 end
  pen.level = math.min(pen.level + 1, ${MAX_LEVEL})
  pen['until'] = now + blockAt(P, pen.level)
  pen.count = 0
  return pen['until'] - now
end
local function penaltyTtl(P, pen, now)
  local ttl = 0
  if pen.count > 0 then ttl = math.max(ttl, pen.since + P.within - now) end
  if pen.level > 0 then ttl = math.max(ttl, pen['until'] + blockAt(P, pen.level) - now) end
  return ttl
end
local function persistPenalty(P, pen, now)
  local ttl = penaltyTtl(P, pen, now)
  if ttl > 0 then
    redis.call('SET', pen.key, num(pen.count) .. ':' .. num(pen.since) .. ':' .. num(pen['until']) .. ':' .. num(pen.level), 'PX', num(ttl))
  else
    redis.call('DEL', pen.key)
  end
end
`
