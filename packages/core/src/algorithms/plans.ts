/**
 * Plans (docs/plans-and-quotas.md): named rule sets of one shape, `plans: { free: [...], pro: [...] }`, where the
 * first plan's rules are the limiter's coded rules and every other plan is a limit per rule over them (an override,
 * algorithms/override.ts, kept in code). A key's state is one whatever its plan, so a plan change keeps the
 * period's usage; the store records the plan in force beside the key's state in the call that decides, so anything
 * reading the store knows each key's plan and limits. Here: the plans parsed, and the limits in force under a
 * key's override and its plan.
 */
import { describeValue, invalid, RateLimitError } from '../support/errors.js'
import { type LimitOverride, parseLimitOverride, type RuleLimit, rulesWith } from './override.js'
import { rateWindowOf } from './rule.js'
import type { Rule } from './types.js'

/** The rules of one plan: one rule, or an array of them (the same shape in every plan). */
export type PlanRules = Rule | readonly Rule[]

/** A plan a key is decided with: its name and its limits over the coded rules (undefined for the first plan). */
export interface PlanInForce {
  /** The plan's name. */
  readonly name: string
  /** Its limits over the coded rules (the first plan's): undefined for the first plan. */
  readonly limits: LimitOverride | undefined
}

/** What a limiter sends for one plan: its name, its limits over the coded rules, and what the store records. */
export interface PlanTerms extends PlanInForce {
  /**
   * @internal What the store records for the key (`RecordedPlan` as JSON): written only when the recorded one
   * differs, or is half way to its end.
   */
  readonly recorded: string
  /**
   * @internal How long the record lasts from its last write (ms): twice the longest rule's window, so that it
   * outlives the key's state.
   */
  readonly horizonMs: number
  /** The largest cost every rule of the plan accepts (its smallest limit, or a rule's own cap). */
  readonly maxCost: number
}

/** A plan as a store records it: its name and its limits over the coded rules (none for the first plan). */
export interface RecordedPlan {
  name: string
  rules?: Record<string, RuleLimit>
}

/**
 * A limiter's plans as a read of a key's recorded plan needs them (`StoreTarget.plan` for an operator's read: `peek`,
 * `inspect`, `top`): the store reads the name it recorded and decides with that plan's limits as the code gives them,
 * never with limits read from the store; a name that is not among them reads as none (the first plan's rules).
 * `limiter.operator.plans` gives it to the tools that read a store (`inspectStored`, `topStored`).
 */
export class RecordedPlans {
  /** The plans' names. */
  readonly names: readonly string[]
  /** @internal */
  readonly byName: ReadonlyMap<string, PlanTerms>
  /** @internal Each plan's limits by name, as JSON (`{ "pro": { "rules": … } }`): what a Redis script reads. */
  readonly table: string

  /** @internal */
  constructor(names: readonly string[], byName: ReadonlyMap<string, PlanTerms>) {
    this.names = names
    this.byName = byName
    const table: Record<string, { rules?: Record<string, RuleLimit> }> = {}
    for (const [name, terms] of byName)
      table[name] = terms.limits?.rules === undefined ? {} : { rules: terms.limits.rules }
    this.table = JSON.stringify(table)
    Object.freeze(this)
  }
}

/** A limiter's plans, parsed. */
export interface PlanSet {
  /** The plans' names, the first one's rules being the coded rules. */
  readonly names: readonly string[]
  /** The coded rules: the first plan's. */
  readonly rules: readonly Rule[]
  readonly byName: ReadonlyMap<string, PlanTerms>
  /** The largest cost any plan accepts (`PlanTerms.maxCost`). */
  readonly maxCost: number
  /** What a read of a key's recorded plan sends the store. */
  readonly recorded: RecordedPlans
  /** The plan of a request whose plan is unknown (`defaultPlan`): undefined refuses it. */
  readonly fallback: PlanTerms | undefined
}

/** The most plans a limiter takes (a plan is code, not a customer). */
export const MAX_PLANS = 64
const PLAN_NAME = /^[A-Za-z0-9_.-]{1,64}$/

/**
 * Validates `plans` (and `defaultPlan`): named rule sets of one shape, position by position the same algorithm and
 * window (the same storage id), differing in their limits (and bursts) only.
 */
export function parsePlans(
  value: unknown,
  defaultPlan: unknown,
  parseRules: (rules: unknown) => readonly Rule[],
): PlanSet {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'plans',
      value,
      'an object like { free: rules, pro: rules }',
    )
  const entries = Object.entries(value)
  if (entries.length === 0 || entries.length > MAX_PLANS)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'plans', value, `1 to ${MAX_PLANS} named plans`)
  const names = entries.map(([name]) => name)
  for (const name of names) {
    if (!PLAN_NAME.test(name))
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'plans',
        name,
        "plan names of letters, digits, `_`, `.`, `-` (at most 64), such as 'pro'",
      )
  }
  const parsed = entries.map(([name, rules]) => ({ name, rules: parseRules(rules) }))
  const [first, ...others] = parsed
  const coded = first!.rules
  // Twice the longest window of any plan's rules (a bucket's fill time, GCRA's rest differ by plan).
  const horizonMs = 2 * Math.max(...parsed.flatMap((plan) => plan.rules.map((rule) => rule.windowMs)))
  const byName = new Map<string, PlanTerms>()
  byName.set(first!.name, planTerms(coded, first!.name, undefined, horizonMs))
  for (const plan of others)
    byName.set(plan.name, planTerms(coded, plan.name, overlayOf(coded, plan.name, plan.rules), horizonMs))
  let fallback: PlanTerms | undefined
  if (defaultPlan !== undefined) {
    fallback = typeof defaultPlan === 'string' ? byName.get(defaultPlan) : undefined
    if (fallback === undefined)
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'defaultPlan',
        defaultPlan,
        `one of the plans: ${names.join(', ')}`,
      )
  }
  const maxCost = Math.max(...[...byName.values()].map((terms) => terms.maxCost))
  return { names, rules: coded, byName, maxCost, recorded: new RecordedPlans(names, byName), fallback }
}

/** Validates a limiter's `plans` and `defaultPlan` (instead of `rules`); undefined without plans. */
export function resolvePlans(
  options: { rules?: unknown; plans?: unknown; defaultPlan?: unknown },
  parseRules: (rules: unknown) => readonly Rule[],
): PlanSet | undefined {
  if (options.plans === undefined) {
    if (options.defaultPlan !== undefined)
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'defaultPlan',
        options.defaultPlan,
        'a plan name, with `plans`',
      )
    return undefined
  }
  if (options.rules !== undefined) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      "`plans` and `rules` were both given: the first plan's rules are the coded rules. Give one of them.",
      { option: 'plans' },
    )
  }
  return parsePlans(options.plans, options.defaultPlan, parseRules)
}

/**
 * The plan named `name`; for another name, the default plan; for none (undefined), the default plan or else the
 * first. Throws `ERR_RATEWINDOW_UNKNOWN_PLAN` for an unknown name without a default plan.
 */
export function planNamed(plans: PlanSet, name: unknown): PlanTerms {
  const terms = typeof name === 'string' ? plans.byName.get(name) : undefined
  if (terms !== undefined) return terms
  if (plans.fallback !== undefined) return plans.fallback
  if (name === undefined) return plans.byName.get(plans.names[0]!)!
  throw new RateLimitError(
    'ERR_RATEWINDOW_UNKNOWN_PLAN',
    `The plan ${describeValue(name)} is not one of this limiter's plans (${plans.names.join(', ')}): return one of them, or give \`defaultPlan\`.`,
    { option: 'plan' },
  )
}

function planTerms(
  coded: readonly Rule[],
  name: string,
  limits: LimitOverride | undefined,
  horizonMs: number,
): PlanTerms {
  const recorded: RecordedPlan = limits?.rules === undefined ? { name } : { name, rules: limits.rules }
  const maxCost = Math.min(...rulesWith(coded, limits).map((rule) => rule.maxCost))
  return Object.freeze({ name, limits, recorded: JSON.stringify(recorded), horizonMs, maxCost })
}

/**
 * The limits of a plan over the coded rules: its rules must be the coded rules' shape (same count; position by
 * position the same algorithm, window or calendar, shadow mode and `warnAt`), each differing at most in its limit
 * and burst.
 */
function overlayOf(coded: readonly Rule[], plan: string, rules: readonly Rule[]): LimitOverride | undefined {
  if (rules.length !== coded.length || rules.some((rule, i) => shapeOf(rule) !== shapeOf(coded[i]!))) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`plans.${plan}\` must have the first plan's shape: ${coded.length} rule(s), position by position the same algorithm, window, shadow mode and warnAt (${coded.map(shapeOf).join(', ')}); received ${rules.map(shapeOf).join(', ')}. Plans differ in their limits only, so that a key keeps its usage when its plan changes.`,
      { option: `plans.${plan}` },
    )
  }
  const overlay: Record<string, RuleLimit> = Object.create(null)
  let any = false
  rules.forEach((rule, i) => {
    const base = coded[i]!
    if (rule.script.params.every((param, j) => param === base.script.params[j])) return
    const burst = burstOf(rule)
    overlay[base.name] = burst === undefined ? { limit: rateOf(rule) } : { limit: rateOf(rule), burst }
    any = true
  })
  // Checked as an override is: the rules buildable with these limits, made again exactly as one.
  return any ? parseLimitOverride({ rules: overlay }, coded) : undefined
}

/** What plans must share per position: the algorithm and its window (GCRA's rate window, the bucket's interval). */
function shapeOf(rule: Rule): string {
  const window =
    rule.algorithm === 'gcra'
      ? rateWindowOf(rule)
      : rule.algorithm === 'token-bucket'
        ? rule.script.params[2]
        : rule.id
  return `${rule.algorithm} ${window}${rule.shadow ? ' shadow' : ''}${rule.warnAt === undefined ? '' : ` warnAt ${rule.warnAt}`}`
}

/** A rule's rate as an override names it: the limit per window; the token bucket's refill, GCRA's rate. */
function rateOf(rule: Rule): number {
  if (rule.algorithm === 'token-bucket') return rule.script.params[1]
  if (rule.algorithm === 'gcra') return (rule.script.params[0] * rateWindowOf(rule)) / rule.script.params[1]
  return rule.limit
}

/** The burst of a GCRA or token bucket rule (its capacity); undefined for the others. */
function burstOf(rule: Rule): number | undefined {
  if (rule.algorithm === 'token-bucket') return rule.script.params[0]
  if (rule.algorithm === 'gcra') return rule.script.params[2]
  return undefined
}

/** Merged limits, per key override object then per plan overlay (a store keeps both objects). */
const merged = new WeakMap<LimitOverride, WeakMap<LimitOverride, LimitOverride>>()

/**
 * The limits in force for a key: its override's (`override`, set by an operator) over its plan's, rule by rule; an
 * override's `limit` for every rule wins over the plan entirely.
 */
export function limitsInForce(
  override: LimitOverride | undefined,
  plan: LimitOverride | undefined,
): LimitOverride | undefined {
  if (plan === undefined) return override
  if (override === undefined || override.limit !== undefined) return override ?? plan
  let byPlan = merged.get(override)
  if (byPlan === undefined) {
    byPlan = new WeakMap()
    merged.set(override, byPlan)
  }
  let limits = byPlan.get(plan)
  if (limits === undefined) {
    const rules: Record<string, RuleLimit> = Object.assign(Object.create(null), plan.rules, override.rules)
    limits = override.until === undefined ? { rules } : { rules, until: override.until }
    byPlan.set(plan, limits)
  }
  return limits
}

/**
 * A recorded plan read back (its JSON as the store keeps it) for `rules` (the coded rules): undefined for none or for
 * what does not read as one; limits that are not a valid override of `rules` read as none (the coded limits).
 */
export function readRecordedPlan(json: unknown, rules: readonly Rule[]): PlanInForce | undefined {
  if (typeof json !== 'string' || json === '') return undefined
  let value: unknown
  try {
    value = JSON.parse(json)
  } catch {
    return undefined
  }
  if (typeof value !== 'object' || value === null) return undefined
  const { name, rules: limits } = value as RecordedPlan
  if (typeof name !== 'string') return undefined
  if (limits === undefined) return { name, limits: undefined }
  try {
    return { name, limits: parseLimitOverride({ rules: limits }, rules) }
  } catch {
    return { name, limits: undefined }
  }
}
