import { formatDuration, parseDuration } from '../support/duration.js'
import { invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { wholeNumber } from '../support/validators.js'
import type { AlgorithmLogic, AlgorithmName, Rule, WindowRuleOptions } from './types.js'

/**
 * Marks the rules the factories made. A non-enumerable property under a registered symbol: it survives another
 * copy of the package (ESM and CommonJS builds, another realm), while look-alike objects and copies such as
 * `{ ...rule }` lack it and are refused.
 */
const RULE_BRAND = Symbol.for('@ratewindow/core.rule')

/**
 * How each rule is made again with another limit (an override, algorithms/override.ts): the factory's own
 * options with the new limit, under the same storage id, so that the overridden rule reads the same state.
 */
const RETUNERS = new WeakMap<Rule, Retune>()

/** @internal The rule with `limit` (and `burst`, where the algorithm has one) in place of its own. */
export type Retune = (limit: number, burst: number | undefined) => Rule

/**
 * An overridden rate's burst when the override names none: the coded burst in proportion to the rate (10× the
 * rate, 10× the burst), rounded down, at least 1.
 */
export function scaledBurst(burst: number, limit: number, newLimit: number): number {
  return Math.max(1, Math.floor((burst * newLimit) / limit))
}

/** Brands and freezes a rule made by one of the factories; `retune` makes it again with another limit. */
export function makeRule(rule: Rule, retune?: Retune): Rule {
  Object.defineProperty(rule, RULE_BRAND, { value: true })
  if (retune !== undefined) RETUNERS.set(rule, retune)
  return Object.freeze(rule)
}

/** @internal How `rule` is made again with another limit; undefined for a rule no factory made. */
export function retunerOf(rule: Rule): Retune | undefined {
  return RETUNERS.get(rule)
}

/** GCRA windows by rule (`rateWindowOf`), worked out once per rule. */
const RATE_WINDOWS = new WeakMap<Rule, number>()

/**
 * @internal The window (ms) a GCRA rule's rate is counted per, which its parameters lose (they keep the rate as a
 * reduced fraction): what a store that makes the rule again elsewhere needs to apply an override's `limit` per
 * that window. 0 for the other algorithms, whose parameters say it.
 */
export function rateWindowOf(rule: Rule): number {
  if (rule.algorithm !== 'gcra') return 0
  let window = RATE_WINDOWS.get(rule)
  if (window === undefined) {
    // The rule made again at one per window: its interval is the window.
    window = retunerOf(rule)?.(1, 1).script.params[1] ?? 0
    RATE_WINDOWS.set(rule, window)
  }
  return window
}

/** Whether `value` is a rule made by one of the factories (not an object that merely looks like one). */
export function isRule(value: unknown): value is Rule {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, RULE_BRAND)
}

/**
 * Products such as `limit × window` must stay exact in IEEE doubles, in JavaScript and in Redis Lua alike.
 * NOTE: 2^50 leaves room for the sums of up to eight such products below 2^53.
 */
export const MAX_PRODUCT = 2 ** 50

const WINDOW_RULE_OPTIONS = namesOf<WindowRuleOptions>({
  limit: true,
  window: true,
  name: true,
  shadow: true,
  warnAt: true,
})

/** Validates a whole, positive count such as `limit` or `capacity`. */
export function parseCount(value: unknown, option: string): number {
  wholeNumber(value, option, {
    min: 1,
    code: 'ERR_RATEWINDOW_INVALID_LIMIT',
    allowed: 'a positive whole number such as 100',
  })
  return value
}

export function checkProduct(a: number, b: number, what: string): void {
  if (a * b > MAX_PRODUCT) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `${what} is too large: the product must stay below 2^50 so that every decision is exact. Use a coarser window or a smaller limit.`,
    )
  }
}

export function parseRuleName(value: unknown, fallback: string): string {
  if (value === undefined) return fallback
  if (typeof value !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(value)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'name',
      value,
      'a short token of letters, digits, `_`, `.`, `-`',
    )
  }
  return value
}

/** Validates a rule's `warnAt` option: a share of the limit above 0 and below 1, or undefined. */
export function parseWarnAt(value: unknown): number | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'number' || !(value > 0 && value < 1))
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'warnAt',
      value,
      'a share of the limit above 0 and below 1, such as 0.8',
    )
  return value
}

/** A rule's `warnAt` field, checked: spread into the rule (nothing when it has none). */
export function warnAtOf(value: unknown): { warnAt?: number } {
  const warnAt = parseWarnAt(value)
  return warnAt === undefined ? {} : { warnAt }
}

/** Validates a rule's `shadow` option. */
export function parseShadow(value: unknown): boolean {
  if (value === undefined) return false
  if (typeof value !== 'boolean')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'shadow', value, 'true or false')
  return value
}

/** Builds a window-based rule: validates `{ limit, window, name }` and binds the algorithm to them. */
export function windowRule(
  algorithm: AlgorithmName,
  code: number,
  options: WindowRuleOptions,
  makeLogic: (limit: number, windowMs: number) => AlgorithmLogic<unknown>,
  maxCost = Number.POSITIVE_INFINITY,
): Rule {
  requireObject(options, algorithm, '{ limit: 100, window: "1m" }')
  rejectUnknownOptions(options, WINDOW_RULE_OPTIONS, `${algorithm} rule`)
  const limit = parseCount(options.limit, 'limit')
  const windowMs = parseDuration(options.window, 'window')
  checkProduct(limit, windowMs, '`limit` × `window` (ms)')
  return makeRule(
    {
      algorithm,
      limit,
      windowMs,
      name: parseRuleName(options.name, `${limit}-per-${formatDuration(windowMs)}`),
      id: `${algorithm
        .split('-')
        .map((word) => word[0])
        .join('')}${windowMs}`,
      maxCost: Math.min(limit, maxCost),
      shadow: parseShadow(options.shadow),
      ...warnAtOf(options.warnAt),
      logic: makeLogic(limit, windowMs),
      script: Object.freeze({ code, params: Object.freeze([limit, windowMs, 0] as const) }),
    },
    (newLimit) =>
      windowRule(
        algorithm,
        code,
        {
          limit: newLimit,
          window: windowMs,
          name: options.name,
          shadow: options.shadow,
          warnAt: options.warnAt,
        },
        makeLogic,
        maxCost,
      ),
  )
}
