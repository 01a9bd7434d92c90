import { RateLimitError } from '@ratewindow/core'

/**
 * The codes of the endpoint's own answers (`{ error: { code, message } }`); a refused limiter call answers with
 * the code of core's `RateLimitError` (`ERR_RATEWINDOW_INVALID_KEY`, `ERR_RATEWINDOW_UNKNOWN_OPTION`, …).
 */
export type AdminErrorCode =
  | 'ERR_RATEWINDOW_UNAUTHORIZED'
  | 'ERR_RATEWINDOW_FORBIDDEN'
  | 'ERR_RATEWINDOW_NOT_FOUND'
  | 'ERR_RATEWINDOW_METHOD_NOT_ALLOWED'
  | 'ERR_RATEWINDOW_UNSUPPORTED_MEDIA_TYPE'
  | 'ERR_RATEWINDOW_BODY_TOO_LARGE'
  | 'ERR_RATEWINDOW_INVALID_JSON'
  | 'ERR_RATEWINDOW_INVALID_REQUEST'
  | 'ERR_RATEWINDOW_RATE_LIMITED'
  | 'ERR_RATEWINDOW_STORE'
  | 'ERR_RATEWINDOW_INTERNAL'

/** An answer other than 2xx, thrown inside the handler and written by `errorResponse`. */
export class AdminError extends Error {
  readonly status: number
  readonly code: AdminErrorCode
  readonly headers: Record<string, string>

  constructor(status: number, code: AdminErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message)
    this.status = status
    this.code = code
    this.headers = headers
  }
}

const JSON_TYPE = 'application/json; charset=utf-8'

/** A JSON answer, never cached. */
export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': JSON_TYPE, 'cache-control': 'no-store', ...headers },
  })
}

/** Core's refusals of an operator call, by code: the store's failures are 503, an option without overrides 409. */
const STATUS_OF_CORE: Partial<Record<RateLimitError['code'], number>> = {
  ERR_RATEWINDOW_STORE: 503,
  ERR_RATEWINDOW_STORE_TIMEOUT: 503,
  ERR_RATEWINDOW_SHED: 503,
  ERR_RATEWINDOW_OVERRIDES_OFF: 409,
}

/**
 * The JSON error for what a route threw: its own `AdminError`, core's `RateLimitError` (bad input: 400; the store:
 * 503), or anything else as a 500 that says nothing of its cause (`onError` hears it).
 */
export function errorResponse(error: unknown): Response {
  if (error instanceof AdminError)
    return json(error.status, { error: { code: error.code, message: error.message } }, error.headers)
  const core = coreError(error)
  if (core !== undefined)
    return json(STATUS_OF_CORE[core.code] ?? 400, { error: { code: core.code, message: core.message } })
  return json(500, {
    error: {
      code: 'ERR_RATEWINDOW_INTERNAL',
      message: 'The admin endpoint failed; the application logs say why.',
    },
  })
}

/**
 * Core's `RateLimitError`, by its name and code rather than `instanceof`: an app may load core twice (its ESM and
 * CJS builds), and each copy has its own class.
 */
export function coreError(error: unknown): RateLimitError | undefined {
  if (error instanceof RateLimitError) return error
  const named = error as { name?: unknown; code?: unknown } | null
  return error instanceof Error && named?.name === 'RateLimitError' && typeof named.code === 'string'
    ? (error as RateLimitError)
    : undefined
}
