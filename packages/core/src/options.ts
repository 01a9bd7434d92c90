import { ALGORITHMS } from './algorithms/index.js'
import { isRule } from './algorithms/rule.js'
import type { Rule } from './algorithms/types.js'
import { describeValue, invalid, RateLimitError } from './errors.js'
import { HEADER_FORMATS, HEADER_FORMATS_ALLOWED } from './headers.js'
import type { HttpRateLimitOptions } from './http.js'

/** Validates `rules`: one rule or a non-empty array of rules with distinct storage ids and policy names. */
export function parseRules(rules: unknown): readonly Rule[] {
  const list = Array.isArray(rules) ? rules : [rules]
  if (list.length === 0)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'rules', rules, 'a rule or a non-empty array of rules')
  const ids = new Set<string>()
  const names = new Set<string>()
  list.forEach((rule: unknown, i) => {
    if (!isRule(rule)) {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        Array.isArray(rules) ? `rules[${i}]` : 'rules',
        rule,
        'a rule made by fixedWindow, slidingWindowLog, slidingWindowCounter or tokenBucket (a copy such as { ...rule } is not one: pass `name` to the factory instead)',
      )
    }
    if (ids.has(rule.id)) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_DUPLICATE_RULE',
        `\`rules[${i}]\` repeats a ${rule.algorithm} rule with the same window; merge them or change one window.`,
        { option: `rules[${i}]` },
      )
    }
    ids.add(rule.id)
    // RateLimit headers and problem details name policies: two rules with one name could not be told apart.
    if (names.has(rule.name)) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_DUPLICATE_RULE',
        `\`rules[${i}].name\` repeats the policy name ${JSON.stringify(rule.name)}; give each rule its own \`name\`.`,
        { option: `rules[${i}].name` },
      )
    }
    names.add(rule.name)
  })
  return Object.freeze([...list])
}

const FUNCTION_OPTIONS = ['key', 'skip', 'requestWasSuccessful', 'onError'] as const
const BOOLEAN_OPTIONS = [
  'legacyHeaders',
  'problemDetails',
  'skipFailedRequests',
  'skipSuccessfulRequests',
] as const

/** Validates the middleware options that `HttpRateLimiter` does not parse itself. */
export function checkOptions<Req>(options: HttpRateLimitOptions<Req>): void {
  for (const name of FUNCTION_OPTIONS) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, options[name], 'a function')
    }
  }
  for (const name of BOOLEAN_OPTIONS) {
    if (options[name] !== undefined && typeof options[name] !== 'boolean') {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, options[name], 'true or false')
    }
  }
  if (
    options.rules !== undefined &&
    (options.limit !== undefined || options.window !== undefined || options.algorithm !== undefined)
  ) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      '`rules` replaces `limit`, `window` and `algorithm`: pass either `rules` or those three, not both.',
      { option: 'rules' },
    )
  }
  if (
    options.algorithm !== undefined &&
    (typeof options.algorithm !== 'string' || !Object.hasOwn(ALGORITHMS, options.algorithm))
  ) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_ALGORITHM',
      'algorithm',
      options.algorithm,
      `one of ${Object.keys(ALGORITHMS)
        .map((name) => `'${name}'`)
        .join(', ')}`,
    )
  }
  if (
    options.headers !== undefined &&
    options.headers !== false &&
    !HEADER_FORMATS.includes(options.headers)
  ) {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'headers', options.headers, HEADER_FORMATS_ALLOWED)
  }
  const { statusCode } = options
  if (statusCode !== undefined && (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'statusCode',
      statusCode,
      'an HTTP error status from 400 to 599',
    )
  }
  if (
    options.limit !== undefined &&
    typeof options.limit !== 'function' &&
    typeof options.limit !== 'number'
  ) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_LIMIT',
      'limit',
      options.limit,
      'a positive whole number or a function of the request',
    )
  }
  const { cost } = options
  if (
    cost !== undefined &&
    typeof cost !== 'function' &&
    (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0)
  ) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_COST',
      'cost',
      cost,
      'a whole number >= 0 or a function of the request',
    )
  }
  const { message } = options
  if (message !== undefined && !['string', 'object', 'function'].includes(typeof message)) {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'message', message, 'a string, an object or a function')
  }
  if (
    options.partitionKeySecret !== undefined &&
    (typeof options.partitionKeySecret !== 'string' || options.partitionKeySecret.length < 16)
  ) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`partitionKeySecret\` must be a string of at least 16 characters; received ${describeValue(typeof options.partitionKeySecret === 'string' ? `${options.partitionKeySecret.length} characters` : options.partitionKeySecret)}.`,
      { option: 'partitionKeySecret' },
    )
  }
}
