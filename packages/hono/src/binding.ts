import { RateLimitError, type TrustProxy } from '@ratewindow/core'
import {
  addressOptions,
  type ClosableSocket,
  connectionStalled,
  type Defer,
  FetchResponse,
  type FrameworkBinding,
  forwardedClient,
  type ReceivedMessage,
  socketClosed,
  trustsEveryAddress,
} from '@ratewindow/core/adapter'
import { emitWarning } from '@ratewindow/core/support'
import type { Context, Env } from 'hono'

/**
 * A runtime's connection info helper, as Hono ships them: `getConnInfo` from `@hono/node-server/conninfo`,
 * `hono/bun`, `hono/deno` or `hono/cloudflare-workers`.
 */
// biome-ignore lint/suspicious/noExplicitAny: Hono's helpers take a Context of any Env.
export type GetConnInfo = (c: Context<any>) => { remote: { address?: string } }

/** How the Hono adapter finds the client address: the options `rateLimit()` and `slowDown()` share. */
// biome-ignore lint/suspicious/noExplicitAny: a Context of any Env, as Hono's own middleware types take.
export interface HonoAddressOptions<E extends Env = any> {
  /**
   * The runtime's connection info helper (`getConnInfo` from `@hono/node-server/conninfo`, `hono/bun`,
   * `hono/deno`, `hono/cloudflare-workers`): the client address is its `remote.address`. This, `clientIp` or
   * a key function is required: Hono itself does not know the client's address.
   */
  getConnInfo?: GetConnInfo
  /** The client address, by your own means (instead of `getConnInfo`). Not with `trustProxy`. */
  clientIp?: (c: Context<E>) => string | undefined
  /**
   * Use `X-Forwarded-For` from the proxies in front of the app: their number (`1` for one load balancer), or
   * their addresses and networks (`'10.0.0.0/8'`, `['127.0.0.1', '::1']`). Never set it without a proxy that
   * sets the header: any client could then choose its own key. Needs `getConnInfo`. @default none
   */
  trustProxy?: TrustProxy
  /**
   * For tests with Hono's `app.request()`, which has no connection: a request whose `getConnInfo` finds none is
   * keyed as one client shared by every such request, the unspecified address `::` (with one process warning,
   * `RATEWINDOW_NO_CONNECTION_INFO`), instead of failing with `ERR_RATEWINDOW_NO_CONNECTION_INFO`. Never in
   * production: a runtime's helper on another runtime finds no connection for any client, and every client would
   * share that key. Needs `getConnInfo`. @default false
   */
  allowNoConnection?: boolean
}

/** The names of `HonoAddressOptions`, for the middlewares' lists of known options. */
export const ADDRESS_NAMES = ['getConnInfo', 'clientIp', 'trustProxy', 'allowNoConnection'] as const

/**
 * What the engines of `rateLimit()` and `slowDown()` know of Hono: the address `clientIp` finds (from
 * `addressSource`), trust proxy, routes. `names` are the middleware's own option names.
 */
export function honoBinding<E extends Env>(
  clientIp: ((c: Context<E>) => string | undefined) | undefined,
  options: HonoAddressOptions<E>,
  names: readonly string[],
  trustProxyHint = TRUST_HINT,
): FrameworkBinding<Context<E>> {
  const { trustProxy } = options
  return {
    name: 'Hono',
    clientIp: (c) => clientIp?.(c),
    // On Node, the connection's `close` (@hono/node-server aborts a request's signal when its response closes,
    // and a response queued behind others on a pipelining connection never does); elsewhere the request's signal
    // aborts when the client disconnects (Bun, Deno, Workers).
    onClose: (c, listener) => {
      const socket = nodeSocketOf(c)
      if (socket !== undefined) return socketClosed(socket, listener)
      const signal = c.req.raw.signal
      if (signal.aborted) {
        queueMicrotask(listener)
        return () => {}
      }
      signal.addEventListener('abort', listener, { once: true })
      return () => signal.removeEventListener('abort', listener)
    },
    gone: (c) => c.req.raw.signal.aborted,
    // On Node only: a pipelining connection that Node stopped reading (elsewhere the runtime reads on).
    stalled: (c) => connectionStalled(nodeMessageOf(c)),
    untrustedForwardedFor: (c) =>
      c.req.header('x-forwarded-for') === undefined
        ? undefined
        : trustProxy === undefined && options.clientIp === undefined,
    trustProxyHint: trustProxyHint,
    permissiveTrustProxy: () => trustsEveryAddress(trustProxy),
    permissiveTrustProxyHint:
      'Set `trustProxy` to the number of proxies in front of the app (e.g. 1) or their addresses, not a /0 network.',
    // The pattern of the route a route's own middleware runs for; a global one (`app.use`) knows none.
    route: (c) => {
      const path = c.req.routePath
      return path === '/*' || path === '*' ? undefined : path
    },
    options: names,
    // After `settle`: the prepared headers follow, until the handler's response is made.
    writeHeaders: (c, headers) => {
      const target = c as Context<E>
      if (!target.finalized) for (const name in headers) target.header(name, headers[name])
    },
  }
}

/** Node's request served by @hono/node-server (its `incoming` in `c.env`); undefined elsewhere. */
function nodeMessageOf(
  c: Context,
): (ReceivedMessage & { socket?: Partial<ClosableSocket> | null }) | undefined {
  const env = c.env as
    | { incoming?: ReceivedMessage & { socket?: Partial<ClosableSocket> | null } }
    | undefined
  return typeof env === 'object' && env !== null ? env.incoming : undefined
}

/** The Node socket of a request served by @hono/node-server; undefined elsewhere. */
function nodeSocketOf(c: Context): ClosableSocket | undefined {
  const socket = nodeMessageOf(c)?.socket
  return typeof socket?.once === 'function' ? (socket as ClosableSocket) : undefined
}

const TRUST_HINT =
  'pass `trustProxy` to rateLimit() (the number of proxies in front of the app, or their addresses)'

function invalidOption(option: string, message: string): RateLimitError {
  return new RateLimitError('ERR_RATEWINDOW_INVALID_OPTION', message, { option })
}

/** How the client address is found: checked here, at construction. */
export function addressSource<E extends Env>(
  options: HonoAddressOptions<E>,
  keyed: boolean,
  keyOption: string,
): ((c: Context<E>) => string | undefined) | undefined {
  const { getConnInfo, clientIp, trustProxy, allowNoConnection = false } = options
  if (typeof allowNoConnection !== 'boolean')
    throw invalidOption('allowNoConnection', '`allowNoConnection` must be true or false.')
  if (allowNoConnection && getConnInfo === undefined)
    throw invalidOption(
      'allowNoConnection',
      "`allowNoConnection` is for `getConnInfo`: it keys the requests it finds no connection for (Hono's app.request()).",
    )
  if (getConnInfo !== undefined && typeof getConnInfo !== 'function')
    throw invalidOption('getConnInfo', "`getConnInfo` must be a function, such as Hono's getConnInfo helper.")
  // `clientIp` a function, not beside `trustProxy`; a `/0` network is accepted (the engine warns of it).
  const { trusted } = addressOptions({ clientIp, trustProxy }, { allowEveryAddress: true })
  if (getConnInfo !== undefined && clientIp !== undefined)
    throw invalidOption('clientIp', 'Pass `getConnInfo` or `clientIp`, not both.')
  if (getConnInfo === undefined && clientIp === undefined) {
    if (trustProxy !== undefined)
      throw invalidOption(
        'trustProxy',
        "`trustProxy` needs `getConnInfo`: the forwarded addresses are walked from the connection's.",
      )
    if (!keyed) {
      throw invalidOption(
        'getConnInfo',
        `Hono does not know the client's address: pass \`getConnInfo\` (from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno' or 'hono/cloudflare-workers'), or \`clientIp(c)\`, or a \`${keyOption}\` function.`,
      )
    }
    return undefined
  }
  if (clientIp !== undefined) return clientIp
  const noConnection = allowNoConnection ? sharedNoConnectionAddress : noConnectionError(keyOption)
  const peer = (c: Context<E>) => connectionAddress(getConnInfo!, c, noConnection)
  if (trusted === undefined) return peer
  return (c) => {
    // The connection's address is hop 0: behind it, the hops its proxy forwarded.
    const address = peer(c)
    if (address === undefined || !trusted(address, 0)) return address
    return forwardedClient(c.req.header('x-forwarded-for'), trusted) ?? address
  }
}

/**
 * The address of a request without a connection (`getConnInfo` threw: no runtime bindings, as with `app.request()`
 * in tests), with `allowNoConnection`: the unspecified address `::`, one key for all such requests.
 */
export const NO_CONNECTION_ADDRESS = '::'

let warnedNoConnection = false

/**
 * The connection's peer address from `getConnInfo`. A request that came with no connection to read (Hono's own
 * `app.request()` in tests gives none: `@hono/node-server`'s helper then throws on the missing `c.env.incoming`,
 * Bun's and Deno's on the missing server; outside tests, a runtime's helper on another runtime) is answered by
 * `noConnection`: an error that names the fixes, or with `allowNoConnection`, one shared address.
 */
function connectionAddress(
  getConnInfo: GetConnInfo,
  c: Context,
  noConnection: (error: unknown) => string,
): string | undefined {
  try {
    return getConnInfo(c).remote.address
  } catch (error) {
    return noConnection(error)
  }
}

/** Why `getConnInfo` found no connection, for messages. */
const reasonOf = (error: unknown) => (error instanceof Error ? error.message : String(error))

/**
 * Without `allowNoConnection`: the request fails (the framework's error handling, a 500), naming the fixes. Every
 * such request would otherwise share one key, which outside tests is every client's.
 */
function noConnectionError(keyOption: string): (error: unknown) => never {
  return (error) => {
    throw new RateLimitError(
      'ERR_RATEWINDOW_NO_CONNECTION_INFO',
      `\`getConnInfo\` found no connection to read (${reasonOf(error)}), as with Hono's app.request() in tests, or the helper of another runtime than the app's: every such request would share one key. ` +
        `Pass a \`${keyOption}\` function (in tests, from a header the test sets) or \`clientIp\`, or the \`getConnInfo\` of the runtime the app runs on; in tests only, \`allowNoConnection: true\` keys them all as one client, '${NO_CONNECTION_ADDRESS}' (docs/testing.md).`,
      { option: 'getConnInfo', cause: error },
    )
  }
}

/** With `allowNoConnection`: one address for every request without a connection, and one warning that says so. */
function sharedNoConnectionAddress(error: unknown): string {
  if (!warnedNoConnection) {
    warnedNoConnection = true
    emitWarning(
      `getConnInfo found no connection to read (${reasonOf(error)}), as with Hono's app.request() in tests: ` +
        `with \`allowNoConnection\`, such requests share one key, '${NO_CONNECTION_ADDRESS}'. Outside tests, pass the ` +
        'getConnInfo of the runtime the app runs on and drop `allowNoConnection` (every client would share that key).',
      'RATEWINDOW_NO_CONNECTION_INFO',
    )
  }
  return NO_CONNECTION_ADDRESS
}

/** How the middlewares answer a request whose client address is not an IP address, for core's warning. */
export const INVALID_ADDRESS_ANSWER = 'answered 500'

/**
 * The answer to a request whose client address is not an IP address (`X-Forwarded-For: unknown` behind
 * `trustProxy`): 500 with no detail, counted nowhere, the error handler not called (core's `unlessInvalidAddress`
 * warns once instead of a stack trace per request).
 */
export const invalidAddressResponse = (c: Context): Response => c.text('Internal Server Error', 500)

/**
 * What the engine reads to judge a refund and give back an in-flight slot (core's `FetchResponse`): finished
 * once the handler returned (`await next()`), closed then or when the client leaves first; its status is `c.res`'s.
 */
export function handlerResponse(c: Context): FetchResponse {
  return new FetchResponse({ signal: c.req.raw.signal, status: () => c.res.status })
}

/** `executionCtx.waitUntil` where the runtime gives one (Workers): work after the response is kept alive. */
export function deferOf(c: Context): Defer | undefined {
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
 * A two-parameter `requestWasSuccessful` gets `(c, c.res)` with `c.res` read when the request is judged (after
 * `await next()`): the response the handler returned, which replaces the one the context held before. For
 * `rateLimit()` and `slowDown()` alike.
 */
export function withHandlerResponse<O extends { requestWasSuccessful?: unknown }>(options: O): O {
  const check = options.requestWasSuccessful
  if (typeof check !== 'function' || check.length < 2) return options
  const byResponse = check as (c: Context, response: Response) => unknown
  return { ...options, requestWasSuccessful: (c: Context, _response: unknown) => byResponse(c, c.res) }
}
