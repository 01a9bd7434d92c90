/**
 * Reading and asserting the headers ratewindow writes, on the response of any HTTP test client: supertest
 * (`response.headers`, `response.status`), `fetch` (`Headers`, `status`), Fastify's `inject` (`headers`,
 * `statusCode`), or a plain record of headers.
 */

/** What a response's rate limit headers say, in whole seconds as the headers carry them. */
export interface RateLimitHeaders {
  /**
   * The style found: `'draft-6'` (`RateLimit-Limit`, `-Remaining`, `-Reset`), `'draft-7'` (one `RateLimit`
   * dictionary), `'draft-8'` (named policies, drafts -08 to -11), `'legacy'` (`X-RateLimit-*` only), or undefined
   * when the response carries none (limiting off, the request skipped, the failure policy answered).
   */
  format: 'draft-6' | 'draft-7' | 'draft-8' | 'legacy' | undefined
  /** The quota of the most restrictive policy. */
  limit: number | undefined
  /** What is left of it (draft-8: the smallest `r`). */
  remaining: number | undefined
  /** Seconds until it resets (draft-8: the `t` of that policy, when given). */
  reset: number | undefined
  /** `Retry-After`, seconds, on a denial. */
  retryAfter: number | undefined
  /** `RateLimit-Policy`: each policy's name (draft-8), quota and window in seconds. */
  policies: { name: string | undefined; limit: number; window: number | undefined }[]
}

/** A response, or its headers: supertest, fetch, Fastify `inject`, or a plain record. */
export type ResponseLike =
  | HeadersLike
  | { headers: HeadersLike; status?: number; statusCode?: number }
  | { headers: HeadersLike; status: number }
type HeadersLike =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | number | undefined>>

/** Thrown by the assertions: vitest and jest show its message and the two values. */
export class RateLimitAssertionError extends Error {
  override readonly name = 'AssertionError'
  constructor(
    message: string,
    readonly actual?: unknown,
    readonly expected?: unknown,
  ) {
    super(message)
  }
}

function headersOf(response: ResponseLike): HeadersLike {
  const maybe = response as { headers?: unknown; get?: unknown }
  if (typeof maybe.get === 'function') return response as HeadersLike
  if (typeof maybe.headers === 'object' && maybe.headers !== null) return maybe.headers as HeadersLike
  return response as HeadersLike
}

function header(headers: HeadersLike, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined
  }
  const lower = name.toLowerCase()
  for (const [key, value] of Object.entries(headers as Record<string, unknown>)) {
    if (key.toLowerCase() !== lower || value === undefined) continue
    return Array.isArray(value) ? value.join(', ') : String(value)
  }
  return undefined
}

function statusOf(response: ResponseLike): number | undefined {
  const { status, statusCode } = response as { status?: unknown; statusCode?: unknown }
  if (typeof status === 'number') return status
  return typeof statusCode === 'number' ? statusCode : undefined
}

function int(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*-?\d+\s*$/.test(value)) return undefined
  return Number(value)
}

/** The items of a structured-field list: `"name";q=1;w=60, ...` or `10;w=60, ...`. */
function items(field: string | undefined): { value: string; params: Map<string, string> }[] {
  if (field === undefined || field.trim() === '') return []
  return field.split(',').map((item) => {
    const [value = '', ...parameters] = item.trim().split(';')
    const params = new Map<string, string>()
    for (const parameter of parameters) {
      const [key = '', raw = ''] = parameter.split('=')
      params.set(key.trim(), raw.trim())
    }
    return { value: value.trim(), params }
  })
}

const unquote = (value: string) => (value.startsWith('"') ? value.slice(1, -1) : value)

/** Reads the rate limit headers of a response (every style ratewindow writes). */
export function readRateLimit(response: ResponseLike): RateLimitHeaders {
  const headers = headersOf(response)
  const policyField = header(headers, 'RateLimit-Policy')
  const policies = items(policyField).map(({ value, params }) => {
    const named = value.startsWith('"')
    return {
      name: named ? unquote(value) : undefined,
      limit: (named ? int(params.get('q')) : int(value)) ?? Number.NaN,
      window: int(params.get('w')),
    }
  })
  const result: RateLimitHeaders = {
    format: undefined,
    limit: undefined,
    remaining: undefined,
    reset: undefined,
    retryAfter: int(header(headers, 'Retry-After')),
    policies,
  }
  const draft6 = header(headers, 'RateLimit-Limit')
  const combined = header(headers, 'RateLimit')
  if (draft6 !== undefined) {
    result.format = 'draft-6'
    result.limit = int(draft6)
    result.remaining = int(header(headers, 'RateLimit-Remaining'))
    result.reset = int(header(headers, 'RateLimit-Reset'))
  } else if (combined !== undefined && /(^|,)\s*limit=/.test(combined)) {
    result.format = 'draft-7'
    const fields = new Map(
      combined.split(',').map((part) => part.trim().split('=') as [string, string | undefined]),
    )
    result.limit = int(fields.get('limit'))
    result.remaining = int(fields.get('remaining'))
    result.reset = int(fields.get('reset'))
  } else if (combined !== undefined || policies.some((policy) => policy.name !== undefined)) {
    result.format = 'draft-8'
    let tightest: { name: string; remaining: number; reset: number | undefined } | undefined
    for (const { value, params } of items(combined)) {
      const remaining = int(params.get('r'))
      if (remaining === undefined) continue
      if (tightest === undefined || remaining < tightest.remaining)
        tightest = { name: unquote(value), remaining, reset: int(params.get('t')) }
    }
    if (tightest !== undefined) {
      result.remaining = tightest.remaining
      result.reset = tightest.reset
      result.limit = policies.find((policy) => policy.name === tightest.name)?.limit
    }
  }
  const legacy = header(headers, 'X-RateLimit-Limit')
  if (result.format === undefined && legacy !== undefined) {
    result.format = 'legacy'
    result.limit = int(legacy)
    result.remaining = int(header(headers, 'X-RateLimit-Remaining'))
  }
  return result
}

/** What to check besides the status: any field of `readRateLimit`'s answer. */
export type ExpectedRateLimit = Partial<Omit<RateLimitHeaders, 'policies'>>

function check(response: ResponseLike, read: RateLimitHeaders, expected: ExpectedRateLimit): void {
  for (const [field, value] of Object.entries(expected)) {
    const actual = read[field as keyof ExpectedRateLimit]
    if (value !== undefined && actual !== value) {
      throw new RateLimitAssertionError(
        `Expected rate limit ${field} ${String(value)}, the response says ${String(actual)} (status ${String(statusOf(response))}).`,
        actual,
        value,
      )
    }
  }
}

/**
 * Asserts that the request was admitted with rate limit headers (a status below 400 when the response has one),
 * and the `expected` fields, e.g. `expectAllowed(response, { remaining: 4 })`. Returns what the headers say.
 */
export function expectAllowed(response: ResponseLike, expected: ExpectedRateLimit = {}): RateLimitHeaders {
  const read = readRateLimit(response)
  const status = statusOf(response)
  if (status !== undefined && status >= 400) {
    throw new RateLimitAssertionError(
      `Expected the request to be admitted; it was answered ${status}.`,
      status,
      '< 400',
    )
  }
  if (read.format === undefined) {
    throw new RateLimitAssertionError(
      'Expected rate limit headers on an admitted request; the response has none (is limiting off, or the request skipped?).',
    )
  }
  check(response, read, expected)
  return read
}

/**
 * Asserts that the request was refused by the rate limit: status 429 (or `statusCode`), a `Retry-After`, and the
 * `expected` fields, e.g. `expectLimited(response, { retryAfter: 60 })`. Returns what the headers say.
 */
export function expectLimited(
  response: ResponseLike,
  expected: ExpectedRateLimit & { statusCode?: number } = {},
): RateLimitHeaders {
  const { statusCode = 429, ...fields } = expected
  const read = readRateLimit(response)
  const status = statusOf(response)
  if (status !== undefined && status !== statusCode) {
    throw new RateLimitAssertionError(
      `Expected status ${statusCode} (rate limited); it was ${status}.`,
      status,
      statusCode,
    )
  }
  if (read.retryAfter === undefined) {
    throw new RateLimitAssertionError(
      'Expected a Retry-After header on a rate limited response; there is none.',
    )
  }
  check(response, read, fields)
  return read
}

/** Asserts that the response carries no rate limit header at all (limiting off, a skipped request). */
export function expectNoRateLimit(response: ResponseLike): void {
  const read = readRateLimit(response)
  if (read.format !== undefined || read.retryAfter !== undefined || read.policies.length > 0) {
    throw new RateLimitAssertionError(
      `Expected no rate limit headers; the response has ${read.format ?? 'Retry-After or RateLimit-Policy'} headers.`,
      read,
    )
  }
}
