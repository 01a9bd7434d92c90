/**
 * Overrides and manual blocks of one client key: plain data kept by the store in one record per key and
 * limiter scope, read by the decision in the same store call. Here: their types, their validation, a change
 * applied to a record on the store's clock, and the rules in force under a record. Written once; every store that
 * decides in JavaScript runs these (stores/local/key-state.ts).
 */
import { describeValue, invalid, RateLimitError } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { optionalText, wholeNumber } from '../support/validators.js'
import { retunerOf } from './rule.js'
import type { Rule } from './types.js'

/** One rule's limit in force for one key. */
export interface RuleLimit {
  /**
   * The limit: requests per window for the window algorithms; the rate (per window, or refill per interval) for
   * GCRA and the token bucket. A positive whole number.
   */
  limit: number
  /**
   * GCRA and the token bucket only: the burst (the bucket's capacity). @default the coded burst in proportion to
   * the new rate (10× the rate, 10× the burst)
   */
  burst?: number
}

/**
 * An override of one key's limits: plain JSON data, never a function. `limit`/`burst` apply to every rule, and
 * `rules` to the rules it names (their policy names); a named rule takes its own entry. It never changes an
 * algorithm or a window: for that, a `rules` function.
 * @example { limit: 1000 } // every rule: 1000 per its window
 * @example { rules: { 'per-minute': { limit: 600 } }, until: Date.parse('2026-12-01') }
 */
export interface LimitOverride {
  /** The limit of every rule (see `RuleLimit.limit`). */
  limit?: number
  /** The burst of every GCRA or token bucket rule (see `RuleLimit.burst`). */
  burst?: number
  /** Limits of the rules named (policy names, `rule.name`). */
  rules?: Record<string, RuleLimit>
  /** When the override ends, epoch ms on the store's clock. @default never, or `ttl` from when it was set */
  until?: number
}

/** A manual block of one key (`block`): every request of the key is refused until `until`. */
export interface ManualBlock {
  /** When the block ends, epoch ms on the store's clock. */
  until: number
  /** Why, for observers and `inspect` only: never sent to the client. */
  reason?: string
}

/**
 * What a store keeps for one client key under one limiter scope: the key itself (so that `list` can show it), its
 * override and its manual block. Ended parts are dropped when read.
 */
export interface OverrideRecord {
  key: string
  limits?: LimitOverride
  block?: ManualBlock
}

/**
 * A change to one record, applied by the store on its own clock (`applyOverrideChange`): `null` removes a part,
 * `undefined` leaves it as it is.
 */
export interface OverrideChange {
  limits?: LimitOverride | null
  /** With `limits`: it ends this many ms after the store's now, or at its `until` when that is earlier. */
  ttlMs?: number
  /** A block for this many ms from the store's now. */
  block?: { forMs: number; reason?: string } | null
}

/** The longest client key a record keeps (`list` shows it). */
export const MAX_OVERRIDE_KEY = 128
const MAX_REASON = 256
const OVERRIDE_NAMES = namesOf<LimitOverride>({ limit: true, burst: true, rules: true, until: true })
const RULE_LIMIT_NAMES = namesOf<RuleLimit>({ limit: true, burst: true })

/**
 * Validates an override for `rules` (the limiter's): known names only, whole positive limits, a burst only where
 * an algorithm has one. Returns a plain copy (what the store keeps).
 */
export function parseLimitOverride(value: unknown, rules: readonly Rule[]): LimitOverride {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'override', value, 'an object like { limit: 1000 }')
  rejectUnknownOptions(value, OVERRIDE_NAMES, 'override')
  const given = value as LimitOverride
  const parsed: LimitOverride = {}
  if (given.limit !== undefined || given.burst !== undefined) {
    for (const rule of rules) checkRuleLimit(rule, given, 'override')
    if (given.limit === undefined)
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'override.limit',
        undefined,
        'a positive whole number with `burst`',
      )
    parsed.limit = given.limit
    if (given.burst !== undefined) parsed.burst = given.burst
  }
  if (given.rules !== undefined) {
    if (typeof given.rules !== 'object' || given.rules === null || Array.isArray(given.rules))
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'override.rules',
        given.rules,
        "an object like { 'per-minute': { limit: 600 } }",
      )
    // NOTE: a map without a prototype: a rule may be named `__proto__` (assigning that name to a plain object
    // sets its prototype, and JSON drops it: Redis then enforced the coded limit where memory enforced the override).
    parsed.rules = Object.create(null) as Record<string, RuleLimit>
    for (const [name, limit] of Object.entries(given.rules)) {
      const rule = rules.find((each) => each.name === name)
      if (rule === undefined) {
        throw new RateLimitError(
          'ERR_RATEWINDOW_INVALID_OPTION',
          `\`override.rules\` names ${JSON.stringify(name)}, which is not a rule of this limiter; its rules are ${rules.map((each) => JSON.stringify(each.name)).join(', ')} (policy names: pass \`name\` to the rule factory to choose one).`,
          { option: `override.rules.${name}` },
        )
      }
      if (typeof limit !== 'object' || limit === null)
        throw invalid(
          'ERR_RATEWINDOW_INVALID_OPTION',
          `override.rules.${name}`,
          limit,
          'an object like { limit: 600 }',
        )
      rejectUnknownOptions(limit, RULE_LIMIT_NAMES, `override.rules.${name}`)
      checkRuleLimit(rule, limit, `override.rules.${name}`)
      parsed.rules[name] =
        limit.burst === undefined ? { limit: limit.limit } : { limit: limit.limit, burst: limit.burst }
    }
  }
  if (parsed.limit === undefined && parsed.rules === undefined)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'override', value, 'an object with `limit` or `rules`')
  if (given.until !== undefined) {
    wholeNumber(given.until, 'override.until', {
      min: 0,
      allowed: 'epoch milliseconds, such as Date.now() + 3_600_000',
    })
    parsed.until = given.until
  }
  // The rules must be buildable with these limits (the factories' own checks: exact arithmetic, sizes).
  rulesWith(rules, parsed)
  return parsed
}

function checkRuleLimit(rule: Rule, limit: Partial<RuleLimit>, option: string): void {
  if (limit.limit !== undefined)
    wholeNumber(limit.limit, `${option}.limit`, { min: 1, code: 'ERR_RATEWINDOW_INVALID_LIMIT' })
  if (limit.burst === undefined) return
  if (rule.algorithm !== 'gcra' && rule.algorithm !== 'token-bucket') {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`${option}.burst\` applies to GCRA and token bucket rules; ${JSON.stringify(rule.name)} is a ${rule.algorithm} rule. Give \`burst\` per rule in \`rules\`.`,
      { option: `${option}.burst` },
    )
  }
  if (!Number.isSafeInteger(limit.burst) || limit.burst < 1)
    throw invalid('ERR_RATEWINDOW_INVALID_LIMIT', `${option}.burst`, limit.burst, 'a positive whole number')
}

/** Validates the `reason` of a block: a short text. */
export function parseReason(value: unknown): string | undefined {
  return optionalText(value, 'reason', MAX_REASON)
}

/** Validates a key to keep a record for: at most `MAX_OVERRIDE_KEY` characters (the record keeps it as it is). */
export function overrideKey(key: string): string {
  if (key.length > MAX_OVERRIDE_KEY) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_KEY',
      `An override or block is kept for keys of at most ${MAX_OVERRIDE_KEY} characters (the record keeps the key so that \`list\` can show it); received ${key.length} characters (${describeValue(key)}).`,
      { option: 'key' },
    )
  }
  return key
}

/** The record as it stands at `now` (store clock): ended parts dropped; undefined when nothing is left. */
export function liveOverrideRecord(
  record: OverrideRecord | undefined,
  now: number,
): OverrideRecord | undefined {
  if (record === undefined) return undefined
  const limits =
    record.limits !== undefined && (record.limits.until ?? Infinity) > now ? record.limits : undefined
  const block = record.block !== undefined && record.block.until > now ? record.block : undefined
  if (limits === record.limits && block === record.block) return limits || block ? record : undefined
  if (limits === undefined && block === undefined) return undefined
  const live: OverrideRecord = { key: record.key }
  if (limits !== undefined) live.limits = limits
  if (block !== undefined) live.block = block
  return live
}

/** `change` applied to `record` at `now` (the store's clock): the record to keep, undefined when nothing is left. */
export function applyOverrideChange(
  record: OverrideRecord | undefined,
  key: string,
  change: OverrideChange,
  now: number,
): OverrideRecord | undefined {
  const next: OverrideRecord = { ...liveOverrideRecord(record, now), key }
  if (change.limits === null) delete next.limits
  else if (change.limits !== undefined) {
    const limits = { ...change.limits }
    if (change.ttlMs !== undefined) limits.until = Math.min(limits.until ?? Infinity, now + change.ttlMs)
    next.limits = limits
  }
  if (change.block === null) delete next.block
  else if (change.block !== undefined) {
    next.block = { until: now + change.block.forMs }
    if (change.block.reason !== undefined) next.block.reason = change.block.reason
  }
  return liveOverrideRecord(next, now)
}

/** When a record has nothing left to keep (ms, the store's clock): the latest end of its parts; Infinity for never. */
export function recordEnd(record: OverrideRecord): number {
  return Math.max(
    record.limits === undefined ? 0 : (record.limits.until ?? Infinity),
    record.block?.until ?? 0,
  )
}

/**
 * The entry of `rules` named `name`, its own only: a record read from JSON is a plain object, whose `constructor`,
 * `toString`… are Object.prototype's (a rule named `constructor` kept its coded limit in memory where the Lua
 * script, whose tables have no prototype, applied the override's `limit`).
 */
function ownEntry(rules: Record<string, RuleLimit> | undefined, name: string): RuleLimit | undefined {
  return rules !== undefined && Object.hasOwn(rules, name) ? rules[name] : undefined
}

/** Rules made again under an override, per override object (a store keeps its record objects). */
const inForceCache = new WeakMap<LimitOverride, { rules: readonly Rule[]; inForce: readonly Rule[] }>()

/** The rules in force under `limits`: each rule it names made again with its limit, under the same storage id. */
export function rulesWith(rules: readonly Rule[], limits: LimitOverride | undefined): readonly Rule[] {
  if (limits === undefined) return rules
  const cached = inForceCache.get(limits)
  if (cached !== undefined && cached.rules === rules) return cached.inForce
  const inForce = rules.map((rule) => {
    const own = ownEntry(limits.rules, rule.name) ?? (limits.limit === undefined ? undefined : limits)
    if (own === undefined || own.limit === undefined) return rule
    const retune = retunerOf(rule)
    if (retune === undefined) return rule
    const burst = rule.algorithm === 'gcra' || rule.algorithm === 'token-bucket' ? own.burst : undefined
    return retune(own.limit, burst)
  })
  inForceCache.set(limits, { rules, inForce })
  return inForce
}
