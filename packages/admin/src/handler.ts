/**
 * `adminHandler()`: the framework-neutral admin endpoint, a Web `Request` in and a `Response` out. Each request
 * passes, in order: the endpoint's own limit (429), `authorize` (401/403), the route (404/405), for an action its
 * content type and body (415/413/400), then the limiter's call (its own errors as 4xx/503).
 */
import { emitWarning } from '@ratewindow/core/support'
import { jsonBody } from './body.js'
import { type AdminConfig, type AdminHandlerOptions, resolveAdminOptions } from './options.js'
import { AdminError, coreError, errorResponse, json } from './reply.js'
import { type Call, MAX_KEY_LENGTH, ROUTES, type Route, rejectUnknown } from './routes.js'

/** The endpoint: `(request) => Promise<Response>`, and where it is mounted. */
export interface AdminHandler {
  (request: Request): Promise<Response>
  /** The `basePath` option: mounts pass on the requests under it. */
  readonly basePath: string
}

/**
 * The admin endpoint (docs/operations.md, "Admin endpoint"): JSON only, no action on GET, actions on POST with
 * `Content-Type: application/json`. Refuses to start without `authorize`.
 * @example
 * const admin = adminHandler({ limiters: [api], authorize: (request) => isOperator(request), basePath: '/_ratewindow' })
 */
export function adminHandler(options: AdminHandlerOptions): AdminHandler {
  const config = resolveAdminOptions(options)
  const handle = async function ratewindowAdmin(request: Request): Promise<Response> {
    try {
      return json(200, await answer(config, request))
    } catch (error) {
      if (!(error instanceof AdminError) && coreError(error) === undefined) report(config, error)
      return errorResponse(error)
    }
  }
  return Object.defineProperty(handle, 'basePath', {
    value: config.basePath,
    enumerable: true,
  }) as AdminHandler
}

/** Whether `path` (a URL's pathname) is under the endpoint's `basePath`: what mounts pass on to it. */
export function isUnder(basePath: string, path: string): boolean {
  return basePath === '' || path === basePath || path.startsWith(`${basePath}/`)
}

async function answer(config: AdminConfig, request: Request): Promise<unknown> {
  await withinOwnLimit(config)
  const actor = await authorized(config, request)
  const url = new URL(request.url)
  const { route, params } = match(config, request.method, url.pathname)
  const limiter = params.limiter === undefined ? undefined : config.limiters.get(params.limiter)
  if (params.limiter !== undefined && limiter === undefined)
    throw new AdminError(
      404,
      'ERR_RATEWINDOW_NOT_FOUND',
      `No limiter named ${JSON.stringify(params.limiter.slice(0, 80))} here; GET /limiters lists them.`,
    )
  const body = route.method === 'POST' ? await jsonBody(request, config.maxBodyBytes) : {}
  const call: Call = {
    config,
    limiter: limiter!,
    key: params.key ?? '',
    query: url.searchParams,
    body,
    actor,
  }
  rejectUnknown(route, call)
  return run(config, route, call)
}

/** The endpoint's own limit, from every caller together, before `authorize`: 429 with `Retry-After` beyond it. */
async function withinOwnLimit(config: AdminConfig): Promise<void> {
  const decision = await config.self.limit('all')
  if (decision.allowed) return
  const seconds = Math.max(1, Math.ceil(decision.retryAfter / 1000))
  throw new AdminError(
    429,
    'ERR_RATEWINDOW_RATE_LIMITED',
    `Too many requests to the admin endpoint: retry in ${seconds} s.`,
    { 'retry-after': String(seconds) },
  )
}

/** The route's call to the limiter: what its store throws (not a coded error) answers 503, its cause reported. */
async function run(config: AdminConfig, route: Route, call: Call): Promise<unknown> {
  try {
    return await route.run(call)
  } catch (error) {
    if (error instanceof AdminError || coreError(error) !== undefined) throw error
    // A connection lost, a timeout: the operator retries; the application's logs say why.
    report(config, error)
    throw new AdminError(
      503,
      'ERR_RATEWINDOW_STORE',
      "The limiter's store failed; the application's logs say why.",
    )
  }
}

/**
 * `authorize`: true or an actor name lets in; a blank name (whitespace only) refuses, as false does: an operator
 * without a name is no actor. A throw refuses (and is reported), never answers 500.
 */
async function authorized(config: AdminConfig, request: Request): Promise<string | undefined> {
  let verdict: unknown
  try {
    verdict = await config.authorize(request)
  } catch (error) {
    report(config, error)
    verdict = false
  }
  if (verdict === true) return undefined
  if (typeof verdict === 'string' && verdict.trim() !== '') return verdict.slice(0, 256)
  if (!request.headers.has('authorization'))
    throw new AdminError(401, 'ERR_RATEWINDOW_UNAUTHORIZED', 'This endpoint needs authorization.', {
      'www-authenticate': 'Bearer',
    })
  throw new AdminError(403, 'ERR_RATEWINDOW_FORBIDDEN', 'Not authorized.')
}

/** The route of a method and path, with its `:limiter` and `:key` decoded; 404 or 405 (with `Allow`) else. */
function match(
  config: AdminConfig,
  method: string,
  pathname: string,
): { route: Route; params: Record<string, string> } {
  const notFound = () =>
    new AdminError(404, 'ERR_RATEWINDOW_NOT_FOUND', 'No such admin route; GET /limiters lists the limiters.')
  if (!isUnder(config.basePath, pathname)) throw notFound()
  const segments = pathname.slice(config.basePath.length).split('/').slice(1)
  const allowed: string[] = []
  for (const route of ROUTES) {
    const params = paramsOf(route.path, segments)
    if (params === undefined) continue
    if (route.method === method) return { route, params }
    allowed.push(route.method)
  }
  if (allowed.length === 0) throw notFound()
  throw new AdminError(
    405,
    'ERR_RATEWINDOW_METHOD_NOT_ALLOWED',
    `Use ${allowed.join(' or ')} here: GET reads, POST acts.`,
    {
      allow: allowed.join(', '),
    },
  )
}

function paramsOf(pattern: readonly string[], segments: string[]): Record<string, string> | undefined {
  if (pattern.length !== segments.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < pattern.length; i++) {
    const part = pattern[i]!
    const segment = segments[i]!
    if (part.startsWith(':')) params[part.slice(1)] = decoded(segment, part.slice(1))
    else if (part !== segment) return undefined
  }
  return params
}

function decoded(segment: string, name: string): string {
  let value: string
  try {
    value = decodeURIComponent(segment)
  } catch {
    throw new AdminError(
      400,
      'ERR_RATEWINDOW_INVALID_REQUEST',
      `The ${name} in the path is not valid URL encoding.`,
    )
  }
  if (value === '' || value.length > MAX_KEY_LENGTH)
    throw new AdminError(
      400,
      'ERR_RATEWINDOW_INVALID_REQUEST',
      `The ${name} in the path must have 1 to ${MAX_KEY_LENGTH} characters; received ${value.length}.`,
    )
  return value
}

function report(config: AdminConfig, error: unknown): void {
  if (config.onError !== undefined) {
    try {
      config.onError(error)
      return
    } catch {
      // NOTE: an onError that throws must not turn the answer into a crash: the warning below says it instead.
    }
  }
  emitWarning(
    `@ratewindow/admin: ${error instanceof Error ? error.message : String(error)}`,
    'RATEWINDOW_ADMIN_ERROR',
  )
}
