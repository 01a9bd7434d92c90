import {
  AccessList,
  type Defer,
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  type HttpRateLimitOptions,
  RateLimitError,
  type RateLimitResult,
  type TrackedResponse,
} from '@ratewindow/core'
import type { Context, Env, MiddlewareHandler } from 'hono'

/** The variables the middleware sets: `c.get('rateLimit')` (undefined when the request was skipped). */
export interface RateLimitVariables {
  /** The rate limit decision for this request, set by `@ratewindow/hono`. */
  rateLimit?: RateLimitResult
}

/** The Hono `Env` of the middleware: `new Hono<RateLimitEnv>()` types `c.get('rateLimit')` everywhere. */
export interface RateLimitEnv {
  Variables: RateLimitVariables
}

/**
 * A runtime's connection info helper, as Hono ships them: `getConnInfo` from `@hono/node-server/conninfo`,
 * `hono/bun`, `hono/deno` or `hono/cloudflare-workers`.
 */
// biome-ignore lint/suspicious/noExplicitAny: Hono's helpers take a Context of any Env.
export type GetConnInfo = (c: Context<any>) => { remote: { address?: string } }

// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env, as Hono's own middleware types take.
export interface HonoRateLimitOptions<E extends Env = any> extends HttpRateLimitOptions<Context<E>> {
  /**
   * The runtime's connection info helper (`getConnInfo` from `@hono/node-server/conninfo`, `hono/bun`,
   * `hono/deno`, `hono/cloudflare-workers`): the client address is its `remote.address`. This, `clientIp` or
   * `key` is required: Hono itself does not know the client's address.
   */
  getConnInfo?: GetConnInfo
  /** The client address, by your own means (instead of `getConnInfo`). Not with `trustProxy`. */
  clientIp?: (c: Context<E>) => string | undefined
  /**
   * Use `X-Forwarded-For` from the proxies in front of the app: their number (`1` for one load balancer), or
   * their addresses and networks (`'10.0.0.0/8'`, `['127.0.0.1', '::1']`). Never set it without a proxy that
   * sets the header: any client could then choose its own key. Needs `getConnInfo`. @default none
   */
  trustProxy?: number | string | readonly string[]
  /** Replaces the default 429 answer: return the response. Headers are already set (`c.header`). */
  handler?: (c: Context<E>, result: RateLimitResult) => Response | Promise<Response>
}

/** The middleware, with a handle to forget a client's counters (e.g. after a successful login). */
export interface RateLimitMiddleware extends MiddlewareHandler<RateLimitEnv> {
  /** Forgets `key` in every counter of this middleware. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Forgets the key of `c` (as `key`, or the client address, gives it). Rejects on a store error. */
  // biome-ignore lint/suspicious/noExplicitAny: a Context of any Env.
  reset(c: Context<any>): Promise<void>
  /**
   * Call when the app goes (a test that builds the app again, a reloaded module, shutdown): gives up this
   * middleware's counters to the limiter that replaces it, and closes the memory store it made for itself (a
   * `store` you passed stays open). Without it, a newer middleware on the same store and counters still takes
   * over, and this one warns once if it decides again (`RATEWINDOW_SUPERSEDED_LIMITER`).
   */
  close(): void
}

const TRUST_HINT =
  'pass `trustProxy` to rateLimit() (the number of proxies in front of the app, or their addresses)'

function invalidOption(option: string, message: string): RateLimitError {
  return new RateLimitError('ERR_RATEWINDOW_INVALID_OPTION', message, { option })
}

/** How the client address is found: checked here, at construction. */
function addressSource<E extends Env>(
  options: HonoRateLimitOptions<E>,
): ((c: Context<E>) => string | undefined) | undefined {
  const { getConnInfo, clientIp, trustProxy, key } = options
  if (getConnInfo !== undefined && typeof getConnInfo !== 'function')
    throw invalidOption('getConnInfo', "`getConnInfo` must be a function, such as Hono's getConnInfo helper.")
  if (clientIp !== undefined && typeof clientIp !== 'function')
    throw invalidOption('clientIp', '`clientIp` must be a function of the context returning an address.')
  if (getConnInfo !== undefined && clientIp !== undefined)
    throw invalidOption('clientIp', 'Pass `getConnInfo` or `clientIp`, not both.')
  if (getConnInfo === undefined && clientIp === undefined) {
    if (trustProxy !== undefined)
      throw invalidOption(
        'trustProxy',
        "`trustProxy` needs `getConnInfo`: the forwarded addresses are walked from the connection's.",
      )
    if (key === undefined) {
      throw invalidOption(
        'getConnInfo',
        "Hono does not know the client's address: pass `getConnInfo` (from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno' or 'hono/cloudflare-workers'), or `clientIp(c)`, or a `key` function.",
      )
    }
    return undefined
  }
  if (clientIp !== undefined) {
    if (trustProxy !== undefined)
      throw invalidOption(
        'trustProxy',
        '`trustProxy` is for `getConnInfo`; `clientIp` finds the address itself.',
      )
    return clientIp
  }
  const peer = (c: Context<E>) => getConnInfo!(c).remote.address
  if (trustProxy === undefined) return peer
  if (typeof trustProxy === 'number') {
    if (!Number.isSafeInteger(trustProxy) || trustProxy < 1) {
      throw invalidOption(
        'trustProxy',
        `\`trustProxy\` must be the number of proxies in front of the app (a whole number >= 1), or their addresses; received ${trustProxy}.`,
      )
    }
    return (c) => forwardedClient(peer(c), c.req.header('x-forwarded-for'), (_, hop) => hop < trustProxy)
  }
  const entries = typeof trustProxy === 'string' ? [trustProxy] : trustProxy
  if (
    !Array.isArray(entries) ||
    entries.length === 0 ||
    !entries.every((entry) => typeof entry === 'string')
  ) {
    throw invalidOption(
      'trustProxy',
      "`trustProxy` must be a number of proxies, or an address or network ('10.0.0.0/8'), or a non-empty array of them.",
    )
  }
  let proxies: AccessList
  try {
    proxies = new AccessList({ ips: entries })
  } catch (error) {
    throw invalidOption('trustProxy', `\`trustProxy\`: ${(error as Error).message}`)
  }
  return (c) => forwardedClient(peer(c), c.req.header('x-forwarded-for'), (address) => proxies.hasIp(address))
}

/**
 * The client behind trusted proxies: from the connection's address back through `X-Forwarded-For` (right to
 * left), the first hop not trusted; the leftmost one when every hop is trusted.
 */
function forwardedClient(
  peer: string | undefined,
  header: string | undefined,
  trusted: (address: string, hop: number) => boolean,
): string | undefined {
  if (peer === undefined || header === undefined || !trusted(peer, 0)) return peer
  const hops = header.split(',')
  let address = peer
  for (let hop = 1, i = hops.length - 1; i >= 0; i--) {
    const next = hops[i]!.trim()
    if (next === '') continue
    address = next
    if (!trusted(address, hop++)) break
  }
  return address
}

/** Whether `trustProxy` trusts every address (a `/0` network): any client then chooses its key. */
function trustsEveryHop(trustProxy: HonoRateLimitOptions['trustProxy']): boolean {
  if (trustProxy === undefined || typeof trustProxy === 'number') return false
  const entries = typeof trustProxy === 'string' ? [trustProxy] : trustProxy
  return entries.some((entry) => /\/0$/.test(entry.trim()))
}

/**
 * What the engine reads to judge a refund and give back an in-flight slot: the response is "finished" once
 * the handler returned it (`await next()`), "closed" then or when the client leaves first (the request's
 * abort signal). Hono runs on runtimes without Node's response object, so this is the same everywhere.
 */
class HandlerResponse implements TrackedResponse {
  readonly #c: Context
  readonly #onFinish: (() => void)[] = []
  readonly #onClose: (() => void)[] = []
  readonly #signal: AbortSignal | undefined
  #finished = false
  #closed = false

  constructor(c: Context) {
    this.#c = c
    const signal = c.req.raw.signal as AbortSignal | undefined
    if (signal?.aborted) this.#closed = true
    else if (signal !== undefined) {
      this.#signal = signal
      signal.addEventListener('abort', this.#close)
    }
  }

  get statusCode(): number {
    return this.#c.res.status
  }

  get writableFinished(): boolean {
    return this.#finished
  }

  get writableEnded(): boolean {
    return this.#finished
  }

  get destroyed(): boolean {
    return this.#closed
  }

  once(event: 'finish' | 'close', listener: () => void): void {
    ;(event === 'finish' ? this.#onFinish : this.#onClose).push(listener)
  }

  /** The handler returned its response (or threw, and Hono's error handler answered). */
  finish(): void {
    if (this.#finished) return
    this.#finished = true
    for (const listener of this.#onFinish.splice(0)) listener()
    this.#close()
  }

  readonly #close = (): void => {
    if (this.#closed && this.#onClose.length === 0) return
    this.#closed = true
    this.#signal?.removeEventListener('abort', this.#close)
    for (const listener of this.#onClose.splice(0)) listener()
  }
}

/** `executionCtx.waitUntil` where the runtime gives one (Workers): work after the response is kept alive. */
function deferOf(c: Context): Defer | undefined {
  let context: { waitUntil?: (work: Promise<unknown>) => void } | undefined
  try {
    context = c.executionCtx
  } catch {
    return undefined // Hono throws where there is no execution context (Node, Bun, Deno)
  }
  const waitUntil = context?.waitUntil
  return typeof waitUntil === 'function' ? (work) => waitUntil.call(context, work) : undefined
}

/**
 * Hono middleware (Node, Bun, Deno): `app.use(rateLimit({ limit: 100, window: '1m', getConnInfo }))`, or per
 * route. Options are validated here, at construction. The result is on `c.get('rateLimit')`.
 */
// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env.
export function rateLimit<E extends Env = any>(options: HonoRateLimitOptions<E> = {}): RateLimitMiddleware {
  const clientIp = addressSource(options)
  const { handler, trustProxy } = options
  const binding: FrameworkBinding<Context<E>> = {
    name: 'Hono',
    clientIp: (c) => clientIp?.(c),
    untrustedForwardedFor: (c) =>
      c.req.header('x-forwarded-for') === undefined
        ? undefined
        : trustProxy === undefined && options.clientIp === undefined,
    trustProxyHint: TRUST_HINT,
    permissiveTrustProxy: () => trustsEveryHop(trustProxy),
    permissiveTrustProxyHint:
      'Set `trustProxy` to the number of proxies in front of the app (e.g. 1) or their addresses, not a /0 network.',
    // The pattern of the route a route's own middleware runs for; a global one (`app.use`) knows none.
    route: (c) => {
      const path = c.req.routePath
      return path === '/*' || path === '*' ? undefined : path
    },
    options: ['handler', 'getConnInfo', 'clientIp', 'trustProxy'],
    // After `settle`: the prepared headers follow, until the handler's response is made.
    writeHeaders: (c, headers) => {
      const target = c as Context<E>
      if (!target.finalized) for (const name in headers) target.header(name, headers[name])
    },
  }
  const engine = new HttpRateLimiter(options, binding)
  const tracks =
    engine.holdsSlots || options.skipFailedRequests === true || options.skipSuccessfulRequests === true

  async function deny(c: Context<E>, decision: HttpDecision): Promise<Response> {
    if (handler && decision.result.source !== 'deny-list') return handler(c, decision.result)
    const { contentType, payload } = await engine.body(c, decision)
    c.header('Content-Type', contentType)
    return c.body(payload, decision.statusCode as 429)
  }

  const middleware: MiddlewareHandler<RateLimitEnv> = async (c, next) => {
    const context = c as unknown as Context<E>
    const pending = engine.decideNow(context)
    const decision = pending instanceof Promise ? await pending : pending
    if (decision === undefined) {
      await next()
      return
    }
    c.set('rateLimit', decision.result)
    const { headers } = decision
    let first: string | undefined
    for (const name in headers) {
      first ??= name
      c.header(name, headers[name])
    }
    if (!decision.result.allowed) return deny(context, decision)
    engine.followSettle(decision, context)
    const response = tracks ? new HandlerResponse(c) : undefined
    if (response !== undefined) engine.track(response, decision, deferOf(c))
    try {
      await next()
    } finally {
      response?.finish()
    }
    // A handler that returned a Response of its own (`new Response(...)`) dropped the prepared headers.
    if (first !== undefined && !c.res.headers.has(first)) {
      for (const name in headers) if (!c.res.headers.has(name)) c.header(name, headers[name])
    }
  }
  return Object.assign(middleware, {
    resetKey: (key: string) => engine.resetKey(key),
    // biome-ignore lint/suspicious/noExplicitAny: a Context of any Env.
    reset: (c: Context<any>) => engine.reset(c),
    close: () => engine.close(),
  })
}

export type { RateLimitObserver, RateLimitResult } from '@ratewindow/core'
export {
  AccessList,
  ConcurrencyLimiter,
  combineObservers,
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimitError,
  RedisStore,
  SyncedStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export default rateLimit
