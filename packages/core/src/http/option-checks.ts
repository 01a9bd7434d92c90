/** The form of each middleware option, checked once at construction (the `RateLimiter` ones: `RateLimiter`). */

import { ALGORITHMS } from '../algorithms/index.js'
import { describeValue, invalid, RateLimitError } from '../support/errors.js'
import { wholeNumber } from '../support/validators.js'
import { HEADER_FORMATS, HEADER_FORMATS_ALLOWED } from './headers.js'
import type { HttpRateLimitOptions } from './options.js'

const FUNCTION_OPTIONS = ['key', 'requestWasSuccessful', 'onError', 'plan'] as const
const BOOLEAN_OPTIONS = [
  'legacyHeaders',
  'warnHeader',
  'problemDetails',
  'skipFailedRequests',
  'skipSuccessfulRequests',
] as const

/** Checks the form of each middleware option (the `RateLimiter` ones are checked by `RateLimiter`). */
export function checkShapes<Req, Res>(options: HttpRateLimitOptions<Req, Res>): void {
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
  const { skip, enabled } = options
  if (skip !== undefined && typeof skip !== 'function' && typeof skip !== 'boolean') {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'skip',
      skip,
      'a function of the request, or true or false',
    )
  }
  if (enabled !== undefined && typeof enabled !== 'boolean') {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'enabled',
      enabled,
      "true or false (from an environment variable, compare it: `enabled: process.env.RATE_LIMIT !== 'off'`)",
    )
  }
  const explicit = ['limit', 'window', 'algorithm'].filter(
    (name) => options[name as keyof typeof options] !== undefined,
  )
  if (options.rules !== undefined && explicit.length > 0) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`rules\` replaces \`limit\`, \`window\` and \`algorithm\`: pass either \`rules\` or those, not both (received \`rules\` and \`${explicit.join('`, `')}\`).`,
      { option: 'rules' },
    )
  }
  if (options.plans !== undefined && (options.rules !== undefined || explicit.length > 0)) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`plans\` replaces \`rules\`, \`limit\`, \`window\` and \`algorithm\` (each plan gives its rules): pass \`plans\` alone (received \`plans\` and \`${[...(options.rules === undefined ? [] : ['rules']), ...explicit].join('`, `')}\`).`,
      { option: 'plans' },
    )
  }
  if (options.plan !== undefined && options.plans === undefined)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'plan', options.plan, 'a function given with `plans`')
  const { algorithm } = options
  if (algorithm !== undefined && (typeof algorithm !== 'string' || !Object.hasOwn(ALGORITHMS, algorithm))) {
    const names = Object.keys(ALGORITHMS).map((name) => `'${name}'`)
    throw invalid('ERR_RATEWINDOW_INVALID_ALGORITHM', 'algorithm', algorithm, `one of ${names.join(', ')}`)
  }
  const { headers } = options
  if (headers !== undefined && headers !== false && !HEADER_FORMATS.includes(headers)) {
    const peer =
      typeof headers === 'object' && headers !== null
        ? " (custom header names are koa-ratelimit's; ratewindow writes the IETF fields and, with `legacyHeaders`, X-RateLimit-*)"
        : ''
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'headers', headers, `${HEADER_FORMATS_ALLOWED}${peer}`)
  }
  for (const name of ['statusCode', 'quotaStatusCode', 'denyStatusCode'] as const) {
    const status = options[name]
    if (status !== undefined && (!Number.isInteger(status) || status < 400 || status > 599)) {
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, status, 'an HTTP error status from 400 to 599')
    }
  }
  const { limit } = options
  if (limit !== undefined && typeof limit !== 'function' && typeof limit !== 'number') {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_LIMIT',
      'limit',
      limit,
      'a positive whole number or a function of the request',
    )
  }
  // A constant, checked here so that its message is not the one of a `limit` function's result.
  if (typeof limit === 'number')
    wholeNumber(limit, 'limit', {
      min: 1,
      code: 'ERR_RATEWINDOW_INVALID_LIMIT',
      allowed: `a positive whole number such as 100${limit === 0 ? ' (to turn limiting off, pass `enabled: false`)' : ''}`,
    })
  const { cost } = options
  if (cost !== undefined && typeof cost !== 'function')
    wholeNumber(cost, 'cost', {
      min: 0,
      code: 'ERR_RATEWINDOW_INVALID_COST',
      allowed: 'a whole number >= 0 or a function of the request',
    })
  const { message } = options
  if (
    message !== undefined &&
    (message === null || !['string', 'object', 'function'].includes(typeof message))
  ) {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'message', message, 'a string, an object or a function')
  }
  const secret = options.partitionKeySecret
  if (secret !== undefined && (typeof secret !== 'string' || secret.length < 16)) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`partitionKeySecret\` must be a string of at least 16 characters; received ${describeValue(typeof secret === 'string' ? `${secret.length} characters` : secret)}.`,
      { option: 'partitionKeySecret' },
    )
  }
}
