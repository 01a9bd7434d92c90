import { RateLimitError, type TrustProxy } from '@ratewindow/core'
import {
  addressOptions,
  type ClosableSocket,
  connectionStalled,
  FetchResponse,
  type FrameworkBinding,
  followedBody,
  forwardedClient,
  type ReceivedMessage,
  socketClosed,
  trustsEveryAddress,
  watchedBody,
  watchedIterable,
} from '@ratewindow/core/adapter'
import { type Context, type Elysia, StatusMap, status } from 'elysia'

/**
 * What the plugin's callbacks (`key`, `skip`, `limit`, `handler`, `message`, …) receive: Elysia's context as it
 * stands when the limiter runs (after parsing, before validation), with the values earlier plugins derived
 * (`ctx.user` of an auth plugin) on it too. Read headers from `ctx.request.headers`: Elysia parses `headers`,
 * `query` and `body` only for the routes whose own code reads them.
 */
export type RateLimitContext = Pick<Context, 'request' | 'server' | 'set' | 'route' | 'path'>

// biome-ignore lint/complexity/noBannedTypes: Elysia's own empty shape, which its types compare exactly.
type Empty = {}

/**
 * A plugin that derives `Derived` into the context of the routes it covers (Elysia's `scoped`): what `rateLimit()`
 * and `slowDown()` return, named here so that their declarations do not spell out Elysia's inferred types.
 */
export type ScopedPlugin<Derived extends Record<string, unknown>> = Elysia<
  '',
  { decorator: Empty; store: Empty; derive: Empty; resolve: Empty },
  { typebox: Empty; error: Empty },
  { schema: Empty; standaloneSchema: Empty; macro: Empty; macroFn: Empty; parser: Empty; response: Empty },
  Empty,
  { derive: Derived; resolve: Empty; schema: Empty; standaloneSchema: Empty; response: Empty },
  { derive: Empty; resolve: Empty; schema: Empty; standaloneSchema: Empty; response: Empty }
>

/** How the plugin finds the client address: the options `rateLimit()` and `slowDown()` share. */
export interface ElysiaAddressOptions {
  /**
   * Use `X-Forwarded-For` from the proxies in front of the app: their number (`1` for one load balancer), or
   * their addresses and networks (`'10.0.0.0/8'`, `['127.0.0.1', '::1']`). The entries are walked back from the
   * connection's address through those proxies only. Never set it without a proxy that sets the header: any
   * client could then choose its own key. @default none
   */
  trustProxy?: TrustProxy
  /** The client address, by your own means (instead of the connection's). Not with `trustProxy`. */
  clientIp?: (ctx: RateLimitContext) => string | undefined
}

/** The names of `ElysiaAddressOptions`, for the plugins' lists of known options. */
export const ADDRESS_NAMES = ['trustProxy', 'clientIp'] as const

/** Node's request under `@elysiajs/node` (srvx keeps it on the Web request as `runtime.node.req`); else undefined. */
function nodeMessageOf(
  request: Request,
): (ReceivedMessage & { socket?: Partial<ClosableSocket> & { remoteAddress?: string } }) | undefined {
  return (request as { runtime?: { node?: { req?: ReturnType<typeof nodeMessageOf> } } }).runtime?.node?.req
}

/**
 * The connection's peer address: the socket's on Node (`@elysiajs/node`), `server.requestIP(request)` on Bun.
 * NOTE: not srvx's `request.ip`: behind its `trustProxy` that is the first X-Forwarded-For entry, which the
 * client writes itself.
 */
function peerAddress({ request, server }: RateLimitContext): string | undefined {
  const message = nodeMessageOf(request)
  if (message !== undefined) return message.socket?.remoteAddress
  if (server === null || server === undefined) throw noConnection()
  return server.requestIP(request)?.address
}

function noConnection(): RateLimitError {
  return new RateLimitError(
    'ERR_RATEWINDOW_NO_CONNECTION_INFO',
    "The request has no server to ask for the client's address: Elysia's `app.handle(request)` in tests has none, nor has `@elysiajs/node` when the app runs on Bun (there, `new Elysia()` without an adapter serves it with Bun's own server). Every such request would share one key. " +
      'Pass a `key` function (in tests, from a header the test sets) or `clientIp`, or serve the app with `app.listen`: on Bun without an adapter, on Node with `@elysiajs/node`.',
    { option: 'clientIp' },
  )
}

/** How the client address is found: checked here, at construction. */
export function addressSource(options: ElysiaAddressOptions): (ctx: RateLimitContext) => string | undefined {
  // `clientIp` a function, not beside `trustProxy`; a `/0` network is accepted (the engine warns of it).
  const { clientIp, trusted } = addressOptions(options, { allowEveryAddress: true })
  if (clientIp !== undefined) return clientIp
  if (trusted === undefined) return peerAddress
  return (ctx) => {
    // The connection's address is hop 0: behind it, the hops its proxy forwarded.
    const address = peerAddress(ctx)
    if (address === undefined || !trusted(address, 0)) return address
    return forwardedClient(ctx.request.headers.get('x-forwarded-for') ?? undefined, trusted) ?? address
  }
}

const TRUST_HINT =
  'pass `trustProxy` to rateLimit() (the number of proxies in front of the app, or their addresses)'

/** What the engines of `rateLimit()` and `slowDown()` know of Elysia. `names` are the plugin's own options. */
export function elysiaBinding(
  options: ElysiaAddressOptions,
  names: readonly string[],
  trustProxyHint = TRUST_HINT,
): FrameworkBinding<RateLimitContext> {
  const clientIp = addressSource(options)
  const { trustProxy } = options
  return {
    name: 'Elysia',
    clientIp,
    // On Node, the connection's `close` (a response queued behind others on a pipelining connection aborts no
    // signal); on Bun, the request's signal aborts when the client disconnects.
    onClose: ({ request }, listener) => {
      const socket = nodeMessageOf(request)?.socket
      if (typeof socket?.once === 'function') return socketClosed(socket as ClosableSocket, listener)
      const { signal } = request
      if (signal.aborted) {
        queueMicrotask(listener)
        return () => {}
      }
      signal.addEventListener('abort', listener, { once: true })
      return () => signal.removeEventListener('abort', listener)
    },
    gone: ({ request }) => request.signal.aborted,
    stalled: ({ request }) => connectionStalled(nodeMessageOf(request)),
    untrustedForwardedFor: ({ request }) =>
      request.headers.has('x-forwarded-for')
        ? trustProxy === undefined && options.clientIp === undefined
        : undefined,
    trustProxyHint,
    permissiveTrustProxy: () => trustsEveryAddress(trustProxy),
    permissiveTrustProxyHint:
      'Set `trustProxy` to the number of proxies in front of the app (e.g. 1) or their addresses, not a /0 network.',
    route: ({ route }) => route,
    options: names,
    // After `settle`: the headers of the response follow, where it is not made yet.
    writeHeaders: (target, headers) => Object.assign((target as RateLimitContext).set.headers, headers),
  }
}

/** How the plugins answer a request whose client address is not an IP address, for core's warning. */
export const INVALID_ADDRESS_ANSWER = 'answered 500'

/**
 * The answer to a request whose client address is not an IP address (`X-Forwarded-For: unknown` behind
 * `trustProxy`): 500 with no detail, counted nowhere, `onError` not called.
 */
export const invalidAddressAnswer = () => status(500, 'Internal Server Error')

/**
 * What the engine reads to judge a refund and give back an in-flight slot: finished once Elysia mapped the
 * handler's answer (`onAfterResponse`), closed then or when the client leaves first.
 */
export const handlerResponse = (request: Request) => new FetchResponse({ signal: request.signal })

/** The status of the response Elysia made: a returned `Response`'s own, else `set.status` (200 when unset). */
function answeredStatus(set: RateLimitContext['set'], value: unknown): number {
  const fromSet =
    typeof set.status === 'number'
      ? set.status
      : ((set.status === undefined ? 200 : StatusMap[set.status]) ?? 200)
  return value instanceof Response && value.status !== 200 ? value.status : fromSet
}

/** What the outcome hooks read of the context. */
interface Outcome {
  request: Request
  set: RateLimitContext['set']
  /** What the handler returned (Elysia's `onAfterResponse` context). */
  responseValue?: unknown
}

/**
 * What a handler returned that Elysia streams after the handler returned: a generator's chunks, a
 * `ReadableStream`, a `Response` with a body. Undefined for an answer sent whole.
 */
function streamed(value: unknown): 'iterable' | 'stream' | 'response' | undefined {
  if (value instanceof Response) return value.body === null ? undefined : 'response'
  if (value instanceof ReadableStream) return 'stream'
  if (value !== null && typeof value === 'object' && typeof (value as { next?: unknown }).next === 'function')
    return 'iterable'
  return undefined
}

/**
 * The hooks that finish the responses the engine watches (`tracked`, by request):
 * - `onAfterHandle`: a streamed answer (a generator, a stream, a `Response` with a body) is replaced by one read
 *   through, which finishes once its last chunk is read or the client left, so that a concurrency slot is held
 *   while the stream runs (Elysia's `onAfterResponse` comes with the first chunk);
 * - `onAfterResponse` once Elysia answered, with the status it answered;
 * - `onError` for a route that threw or failed validation or parsing (Elysia runs no route's `onAfterResponse`
 *   then), with the error's status (500 at least for an error that names none).
 */
export function outcomeHooks(tracked: WeakMap<Request, FetchResponse>): {
  afterHandle: (outcome: Outcome) => unknown
  afterResponse: (outcome: Outcome) => void
  error: (outcome: Outcome) => void
} {
  const finish = (request: Request, statusCode: number) => {
    const response = tracked.get(request)
    if (response === undefined) return
    tracked.delete(request)
    response.finish(statusCode)
  }
  return {
    // NOTE: Elysia reads a hook's source for `return` to know that it may replace the answer.
    afterHandle: function rateLimitStream({ request, set, responseValue }: Outcome) {
      const kind = streamed(responseValue)
      const response = kind === undefined ? undefined : tracked.get(request)
      if (response === undefined) return undefined
      tracked.delete(request)
      const statusCode = answeredStatus(set, responseValue)
      const ended = (failed: boolean) => response.finish(failed ? 500 : statusCode)
      if (kind === 'iterable') return watchedIterable(responseValue as AsyncIterable<unknown>, ended)
      if (kind === 'stream') {
        const stream = responseValue as ReadableStream & { sse?: unknown }
        return Object.assign(watchedBody(stream, ended), stream.sse === undefined ? {} : { sse: stream.sse })
      }
      const answer = responseValue as Response
      const body = followedBody(answer.body, request.method, statusCode, response)
      return body === undefined ? undefined : new Response(body, answer)
    },
    afterResponse: function rateLimitOutcome({ request, set, responseValue }: Outcome) {
      finish(request, answeredStatus(set, responseValue))
    },
    error: function rateLimitFailure({ request, set }: Outcome) {
      const statusCode = answeredStatus(set, undefined)
      finish(request, statusCode >= 400 ? statusCode : 500)
    },
  }
}

let seeds = 0

/**
 * A seed of its own for each plugin made: Elysia skips a plugin whose name and seed it has seen already, and two
 * `rateLimit()` calls are two limiters (the same one used twice is still one).
 */
export const pluginSeed = (): number => ++seeds
