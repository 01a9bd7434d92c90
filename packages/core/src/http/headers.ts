import type { Rule } from '../algorithms/types.js'
import { reachedShare } from '../limiter/near-limit.js'
import type { RateLimitResult, RuleResult } from '../result.js'
import { invalid } from '../support/errors.js'
import { hmacSha256, toBase64, utf8 } from '../support/hash.js'

/**
 * Which IETF RateLimit header draft to write (draft-ietf-httpapi-ratelimit-headers):
 * - `'draft-6'`: `RateLimit-Limit`, `-Remaining`, `-Reset` and `RateLimit-Policy` (drafts -05 and -06).
 * - `'draft-7'`: one `RateLimit: limit=…, remaining=…, reset=…` dictionary and `RateLimit-Policy` (-07).
 * - `'draft-8'`: named policies, `r` the remaining quota and `t` the seconds until it resets (-08 and -09).
 * - `'draft-11'`: the same syntax, `r` the available quota and `t` the effective window (-10 and -11).
 */
export type HeaderFormat = 'draft-6' | 'draft-7' | 'draft-8' | 'draft-11'

export interface HeaderOptions {
  /** The RateLimit header style, or `false` for none. @default 'draft-6' */
  format?: HeaderFormat | false
  /** Also write `X-RateLimit-Limit`, `-Remaining` and `-Reset` (epoch seconds). @default false */
  legacy?: boolean
  /**
   * draft-8/-11 partition key (`pk`): base64, already keyed, as `partitionKey()` returns it. Never pass a bare
   * identifier; anything but base64 throws `ERR_RATEWINDOW_INVALID_OPTION`.
   */
  partitionKey?: string
}

export const HEADER_FORMATS: readonly HeaderFormat[] = ['draft-6', 'draft-7', 'draft-8', 'draft-11']

/** The allowed values of a header format option, for error messages. */
export const HEADER_FORMATS_ALLOWED = "'draft-6', 'draft-7', 'draft-8', 'draft-11' or false"

/**
 * Whole seconds for a header, rounded up.
 * NOTE: rounding up means a client that waits the advertised seconds is never early; a blocked client never
 * sees 0.
 */
export function toSeconds(ms: number): number {
  return Math.ceil(ms / 1000)
}

/**
 * The response headers for a decision, as a plain record. On a denial `Retry-After` is added. The reset values
 * (draft-6/-7 `reset`, `X-RateLimit-Reset`, draft-8 `t`) follow `headerReset`: at remaining 0 the wait until the
 * next cost-1 request passes (on a denial, `Retry-After`), otherwise until the whole quota is free again.
 */
export function rateLimitHeaders(
  result: RateLimitResult,
  options: HeaderOptions = {},
): Record<string, string> {
  const { format = 'draft-6', legacy = false } = options
  const pk = partitionKeyParameter(options.partitionKey)
  let headers: Record<string, string>
  if (format === 'draft-6') headers = draft6(result)
  else if (format === 'draft-7') headers = draft7(result)
  else if (format === 'draft-8' || format === 'draft-11') headers = namedPolicies(result, format, pk)
  else if (format === false) headers = {}
  else throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'headers', format, HEADER_FORMATS_ALLOWED)
  if (legacy) {
    headers['X-RateLimit-Limit'] = numeral(result.limit)
    headers['X-RateLimit-Remaining'] = numeral(result.remaining)
    headers['X-RateLimit-Reset'] = String(toSeconds(result.at + headerReset(result)))
  }
  if (!result.allowed) headers['Retry-After'] = numeral(toSeconds(result.retryAfter))
  return headers
}

/**
 * The wait (ms) the reset headers announce, one rule for every response, allowed or denied: with `remaining` 0,
 * the wait until the next cost-1 request is admitted (on a denial, `retryAfter`: the two agree for cost 1);
 * otherwise the wait until the quota is whole again (`reset`). A client that pauses at remaining 0 until the
 * reset is then never refused for waiting too little, and never waits longer than it must.
 */
export function headerReset(result: RateLimitResult): number {
  if (result.remaining > 0) return result.reset
  if (!result.allowed) return result.retryAfter
  let next = 0
  for (const rule of result.rules)
    if (rule.remaining === 0 && rule.next !== undefined) next = Math.max(next, rule.next)
  // A store that does not tell when the next request passes: the whole quota's wait, which is never too short.
  return next > 0 ? next : result.reset
}

/** One rule's reset for draft-8 `t`, by the same rule as `headerReset`. */
function ruleReset(rule: RuleResult): number {
  if (rule.remaining > 0) return rule.reset
  if (!rule.allowed) return rule.retryAfter
  return rule.next !== undefined && rule.next > 0 ? rule.next : rule.reset
}

/** Drafts -05/-06: three fields for the most restrictive rule, and the policy list. */
function draft6(result: RateLimitResult): Record<string, string> {
  return {
    'RateLimit-Policy': policyLists.of(result.rules, policyList),
    'RateLimit-Limit': numeral(result.limit),
    'RateLimit-Remaining': numeral(result.remaining),
    'RateLimit-Reset': numeral(toSeconds(headerReset(result))),
  }
}

/** Draft -07: one dictionary for the most restrictive rule, and the policy list. */
function draft7(result: RateLimitResult): Record<string, string> {
  const reset = toSeconds(headerReset(result))
  return {
    'RateLimit-Policy': policyLists.of(result.rules, policyList),
    RateLimit: `limit=${numeral(result.limit)}, remaining=${numeral(result.remaining)}, reset=${numeral(reset)}`,
  }
}

/** The decimal strings of the numbers below this, made once each: remaining counts, limits and seconds. */
const NUMERALS = 10_000
const numerals: string[] = []

/** `String(n)`, made once for a whole number below `NUMERALS`. */
function numeral(n: number): string {
  if (!(n >= 0 && n < NUMERALS && Number.isInteger(n))) return String(n)
  let made = numerals[n]
  if (made === undefined) {
    made = String(n)
    numerals[n] = made
  }
  return made
}

/**
 * Strings made once per rule set (the rules of a result, by identity and in order): a middleware's rule set is
 * made once, so its policy field is a constant.
 */
class PerRuleSet {
  /** By the set's first rule: each set starting with it, and its string. Rules are frozen. */
  readonly #byFirst = new WeakMap<Rule, { rules: readonly Rule[]; value: string }[]>()

  of(results: readonly RuleResult[], make: (results: readonly RuleResult[]) => string): string {
    const first = results[0]?.rule
    if (first === undefined) return make(results)
    let known = this.#byFirst.get(first)
    if (known === undefined) {
      known = []
      this.#byFirst.set(first, known)
    }
    for (const each of known) if (sameRules(each.rules, results)) return each.value
    const value = make(results)
    // A bound: sets made per request (a `rules` function building new rules each time) are not all kept.
    if (known.length < 16) known.push({ rules: results.map(({ rule }) => rule), value })
    return value
  }
}

function sameRules(rules: readonly Rule[], results: readonly RuleResult[]): boolean {
  if (rules.length !== results.length) return false
  for (let i = 0; i < rules.length; i++) if (rules[i] !== results[i]!.rule) return false
  return true
}

const policyLists = new PerRuleSet()
const namedPolicyLists = new PerRuleSet()

/**
 * The draft -06/-07 policy list: one `limit;w=seconds` item per distinct limit.
 * NOTE: those drafts forbid two policies with the same quota (`10;w=1, 10;w=60` is their own example of an
 * invalid field). Of rules sharing a limit the one with the longest window is kept: it is the stricter.
 */
function policyList(rules: readonly RuleResult[]): string {
  const windows = new Map<number, number>()
  for (const { rule } of rules) {
    windows.set(rule.limit, Math.max(windows.get(rule.limit) ?? 0, toSeconds(rule.windowMs)))
  }
  let list = ''
  for (const [limit, window] of windows) list += `${list === '' ? '' : ', '}${limit};w=${window}`
  return list
}

/**
 * Drafts -08 to -11: every policy by name in `RateLimit-Policy`; in `RateLimit`, every rule when the request
 * passes and only the rules that block it on a denial, so that no item contradicts `Retry-After`.
 */
function namedPolicies(
  result: RateLimitResult,
  format: 'draft-8' | 'draft-11',
  pk: string,
): Record<string, string> {
  // With a partition key, the field differs per client.
  const policies =
    pk === '' ? namedPolicyLists.of(result.rules, unkeyedPolicies) : namedPolicyList(result.rules, pk)
  const limits = result.allowed
    ? result.rules.map(
        (rule) => `"${rule.rule.name}";r=${rule.remaining}${resetParameter(rule, format)}${pk}`,
      )
    : result.rules
        .filter((rule) => !rule.allowed && rule.retryAfter > 0)
        .map((rule) => `"${rule.rule.name}";r=${rule.remaining};t=${toSeconds(ruleReset(rule))}${pk}`)
  // An empty List is not serialized at all (RFC 9651, 4.1.1).
  return limits.length === 0
    ? { 'RateLimit-Policy': policies }
    : { 'RateLimit-Policy': policies, RateLimit: limits.join(', ') }
}

/** The draft -08/-11 policy field: every rule's policy by name, with the partition key parameter `pk`. */
function namedPolicyList(rules: readonly RuleResult[], pk: string): string {
  return rules
    .map(({ rule }) => `"${rule.name}";q=${rule.limit};w=${toSeconds(rule.windowMs)}${pk}`)
    .join(', ')
}

const unkeyedPolicies = (rules: readonly RuleResult[]) => namedPolicyList(rules, '')

/**
 * The `t` parameter of a rule that admits the request.
 * NOTE: draft-8 reads `t` as the seconds until the quota resets (`ruleReset`: at r=0, until the next request
 * passes): for a full quota nothing is pending, and `t` is left out (the draft's own example of "no time window reset"). Draft-11 reads it as the effective window,
 * the time within which the client should use no more than `r`: a full quota's is the policy window, and no
 * quota spans more than its window (the sliding window counter's full reset can take two), but a calendar quota's
 * period, whose window is nominal (a 31-day month).
 */
function resetParameter(rule: RuleResult, format: 'draft-8' | 'draft-11'): string {
  if (format === 'draft-8') {
    const reset = ruleReset(rule)
    return reset > 0 ? `;t=${toSeconds(reset)}` : ''
  }
  const { windowMs, periods } = rule.rule
  // A quota's period follows the calendar: its `w` is nominal (30 days a month), and a 31-day month's reset is its own.
  const span = periods === undefined ? Math.min(rule.reset, windowMs) : rule.reset
  return `;t=${toSeconds(rule.reset > 0 ? span : windowMs)}`
}

/**
 * Adds a concurrency limit to draft-8/-11 headers: a policy `"<name>";q=<limit>;qu="concurrent-requests"` and
 * its remaining slots `"<name>";r=<free>` (no `w` or `t`: in-flight requests have no window). Earlier drafts
 * cannot express a quota unit and get nothing. Mutates and returns `headers`.
 */
export function addConcurrencyHeaders(
  headers: Record<string, string>,
  format: HeaderFormat | false,
  concurrency: { name: string; limit: number; remaining: number },
  options: { partitionKey?: string } = {},
): Record<string, string> {
  if (format !== 'draft-8' && format !== 'draft-11') return headers
  const pk = partitionKeyParameter(options.partitionKey)
  const policy = `"${concurrency.name}";q=${concurrency.limit};qu="concurrent-requests"${pk}`
  const item = `"${concurrency.name}";r=${concurrency.remaining}${pk}`
  const join = (list: string | undefined, next: string) => (list ? `${list}, ${next}` : next)
  headers['RateLimit-Policy'] = join(headers['RateLimit-Policy'], policy)
  headers.RateLimit = join(headers.RateLimit, item)
  return headers
}

/** A base64 string: the Byte Sequence of RFC 9651, padded as its serializers write it. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

function partitionKeyParameter(partitionKey: unknown): string {
  if (partitionKey === undefined) return ''
  if (typeof partitionKey !== 'string' || partitionKey === '' || !BASE64.test(partitionKey)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'partitionKey',
      partitionKey,
      'base64 bytes, as partitionKey(identifier, secret) returns them, never a bare identifier',
    )
  }
  return `;pk=:${partitionKey}:`
}

/**
 * A draft-8/-11 partition key: an HMAC-SHA256 of the identifier under a server secret, truncated to 96 bits
 * and base64-encoded, so that headers never reveal an IP or user id (a bare hash of an IPv4 is reversible).
 */
export function partitionKey(identifier: string, secret: string): string {
  return toBase64(hmacSha256(secret, utf8(identifier)).subarray(0, 12))
}

/**
 * The `RateLimit-Warning` field of an admitted result (the middleware's `warnHeader`): each rule with a `warnAt` whose
 * share of its limit is used, as `"<policy>";q=<limit>;r=<remaining>`; undefined when none is.
 */
export function softLimitField(result: RateLimitResult): string | undefined {
  let field: string | undefined
  for (const { rule, remaining } of result.rules) {
    const { warnAt, limit } = rule
    if (warnAt === undefined || !reachedShare(limit, remaining, warnAt)) continue
    const item = `"${rule.name}";q=${limit};r=${remaining}`
    field = field === undefined ? item : `${field}, ${item}`
  }
  return field
}
