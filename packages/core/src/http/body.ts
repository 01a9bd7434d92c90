import { type RateLimitResult, type RuleResult, refusingQuota } from '../result.js'
import type { HttpConfig } from './config.js'
import { toSeconds } from './headers.js'

/** A rendered response body. */
export interface RenderedBody {
  contentType: string
  payload: string
}

/** Reason phrases of the statuses a block is commonly answered with (no `node:http`: core runs anywhere). */
const STATUS_PHRASES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  418: "I'm a Teapot",
  420: 'Enhance Your Calm',
  423: 'Locked',
  429: 'Too Many Requests',
  451: 'Unavailable For Legal Reasons',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
}

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
/** The problem type of a refusal by a calendar quota (its period's allowance is used), apart from a rate refusal's. */
export const QUOTA_USED =
  'https://github.com/ratewindow/ratewindow/blob/main/docs/plans-and-quotas.md#quota-used'

/**
 * The body of a denial: the failure policy's 503 text, the user's `message`, RFC 9457 problem details, or the
 * default JSON. A `message` function that throws rejects, and the adapter hands the error to the framework.
 */
export async function renderBody<Req>(
  config: HttpConfig<Req>,
  request: Req,
  result: RateLimitResult,
  statusCode: number,
): Promise<RenderedBody> {
  if (result.source === 'policy') {
    return json({ error: 'Service Unavailable', message: 'Rate limiting is unavailable; retry later.' })
  }
  if (result.source === 'deny-list') return json({ error: 'Forbidden', message: 'Access denied.' })
  const { message } = config
  if (message !== undefined) {
    const body = typeof message === 'function' ? await message(request, result) : message
    return typeof body === 'string' ? { contentType: 'text/plain; charset=utf-8', payload: body } : json(body)
  }
  const seconds = toSeconds(result.retryAfter)
  const retry = retryIn(seconds)
  if (result.blocked !== undefined) {
    // A penalty block, or an operator's (`block`): its own wording, under the block's status
    // (`penalty.statusCode`, 403 or another). An operator's reason is never sent.
    const title = STATUS_PHRASES[statusCode] ?? 'Blocked'
    const detail =
      result.manualBlock === undefined
        ? `Blocked after repeated rate limit violations: ${retry}`
        : `Blocked by an operator: ${retry}`
    if (config.problemDetails) {
      return {
        contentType: 'application/problem+json',
        payload: JSON.stringify({ type: 'about:blank', title, status: statusCode, detail }),
      }
    }
    return json({ error: title, message: detail, retryAfter: seconds, blocked: true })
  }
  const quota = refusingQuota(result)
  if (quota !== undefined) return quotaBody(config, result, quota, statusCode)
  if (config.problemDetails) {
    const detail = `Too many requests: ${retry}`
    return {
      contentType: 'application/problem+json',
      payload: JSON.stringify({
        type: QUOTA_EXCEEDED,
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status: statusCode,
        detail,
        'violated-policies': result.rules.filter((rule) => !rule.allowed).map((rule) => rule.rule.name),
      }),
    }
  }
  return tooManyRequestsBody(result.retryAfter)
}

/**
 * The default body of a 429 (without `message` or `problemDetails`): what every adapter answers a request over
 * the limit, and `slowDown()` one past its bounds on delayed requests. `retryAfterMs` is rounded up to seconds.
 */
export function tooManyRequestsBody(retryAfterMs: number): RenderedBody {
  const seconds = toSeconds(retryAfterMs)
  return json({
    error: 'Too Many Requests',
    message: `Too many requests: ${retryIn(seconds)}`,
    retryAfter: seconds,
  })
}

const retryIn = (seconds: number) => `retry in ${seconds} second${seconds === 1 ? '' : 's'}.`

function json(body: unknown): RenderedBody {
  return { contentType: 'application/json; charset=utf-8', payload: JSON.stringify(body) }
}

/**
 * The body of a refusal by a `quota` rule: its period's allowance is used until the period ends (`Retry-After`), which
 * slowing down does not change; it names the quota and when it renews.
 */
function quotaBody<Req>(
  config: HttpConfig<Req>,
  result: RateLimitResult,
  quota: RuleResult,
  statusCode: number,
): RenderedBody {
  const seconds = toSeconds(result.retryAfter)
  const renews = new Date(result.at + quota.retryAfter).toISOString()
  // A costly request may be refused by a quota that still holds units: say so, rather than "used".
  const detail =
    quota.remaining > 0
      ? `The quota '${quota.rule.name}' has ${quota.remaining} left until ${renews}, less than this request costs (${result.cost}): ${retryIn(seconds)}`
      : `The quota '${quota.rule.name}' is used until ${renews}: ${retryIn(seconds)}`
  if (config.problemDetails) {
    return {
      contentType: 'application/problem+json',
      payload: JSON.stringify({
        type: QUOTA_USED,
        title: 'The quota for this period is used',
        status: statusCode,
        detail,
        'violated-policies': result.rules.filter((rule) => !rule.allowed).map((rule) => rule.rule.name),
      }),
    }
  }
  return json({
    error: 'Quota Exceeded',
    message: detail,
    quota: quota.rule.name,
    renews,
    retryAfter: seconds,
  })
}
