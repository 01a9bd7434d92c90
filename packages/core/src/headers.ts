import { createHmac } from 'node:crypto'
import { invalid } from './errors.js'
import type { RateLimitResult, RuleResult } from './result.js'

/** Which IETF RateLimit header draft to write. */
export type HeaderFormat = 'draft-6' | 'draft-7' | 'draft-8'

export interface HeaderOptions {
  /** The RateLimit header style, or `false` for none. @default 'draft-6' */
  format?: HeaderFormat | false
  /** Also write `X-RateLimit-Limit`, `-Remaining` and `-Reset` (epoch seconds). @default false */
  legacy?: boolean
  /** draft-8 partition key, already keyed: see `partitionKey()`. Never pass a bare identifier. */
  partitionKey?: string
}

export const HEADER_FORMATS: readonly HeaderFormat[] = ['draft-6', 'draft-7', 'draft-8']

/**
 * Whole seconds for a header, rounded up.
 * NOTE: rounding up means a client that waits the advertised seconds is never early; a blocked client never
 * sees 0.
 */
export function toSeconds(ms: number): number {
  return Math.ceil(ms / 1000)
}

/**
 * The response headers for a decision, as a plain record. On a denial `Retry-After` is added and the reset
 * value equals it: the truthful `retryAfter`, not the end of some window.
 */
export function rateLimitHeaders(
  result: RateLimitResult,
  options: HeaderOptions = {},
): Record<string, string> {
  const { format = 'draft-6', legacy = false } = options
  const headers: Record<string, string> = {}
  const resetSeconds = toSeconds(result.allowed ? result.reset : result.retryAfter)
  if (format === 'draft-6') {
    headers['RateLimit-Policy'] = policyList(result.rules)
    headers['RateLimit-Limit'] = String(result.limit)
    headers['RateLimit-Remaining'] = String(result.remaining)
    headers['RateLimit-Reset'] = String(resetSeconds)
  } else if (format === 'draft-7') {
    headers['RateLimit-Policy'] = policyList(result.rules)
    headers.RateLimit = `limit=${result.limit}, remaining=${result.remaining}, reset=${resetSeconds}`
  } else if (format === 'draft-8') {
    const pk = options.partitionKey === undefined ? '' : `;pk=:${options.partitionKey}:`
    headers['RateLimit-Policy'] = result.rules
      .map(({ rule }) => `"${rule.name}";q=${rule.limit};w=${toSeconds(rule.windowMs)}${pk}`)
      .join(', ')
    headers.RateLimit = result.rules
      .map((rule) => `"${rule.rule.name}";r=${rule.remaining};t=${toSeconds(ruleWait(result, rule))}${pk}`)
      .join(', ')
  } else if (format !== false) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'headers',
      format,
      "'draft-6', 'draft-7', 'draft-8' or false",
    )
  }
  if (legacy) {
    headers['X-RateLimit-Limit'] = String(result.limit)
    headers['X-RateLimit-Remaining'] = String(result.remaining)
    headers['X-RateLimit-Reset'] = String(
      toSeconds(result.at + (result.allowed ? result.reset : result.retryAfter)),
    )
  }
  if (!result.allowed) headers['Retry-After'] = String(resetSeconds)
  return headers
}

/** A rule's own wait: its `retryAfter` where it blocks the request, else its reset. */
function ruleWait(result: RateLimitResult, rule: RuleResult): number {
  return !result.allowed && !rule.allowed ? rule.retryAfter : rule.reset
}

function policyList(rules: readonly RuleResult[]): string {
  return rules.map(({ rule }) => `${rule.limit};w=${toSeconds(rule.windowMs)}`).join(', ')
}

/**
 * A draft-8 partition key: an HMAC-SHA256 of the identifier under a server secret, truncated to 96 bits and
 * base64-encoded, so that headers never reveal an IP or user id (a bare hash of an IPv4 is reversible).
 */
export function partitionKey(identifier: string, secret: string): string {
  return createHmac('sha256', secret).update(identifier).digest().subarray(0, 12).toString('base64')
}
