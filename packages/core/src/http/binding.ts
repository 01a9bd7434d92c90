/**
 * What an adapter hands the HTTP engine: its framework (`FrameworkBinding`), where the engine sits
 * (`EnginePlacement`), and the narrow part of a response and a socket the engine reads. No Node types: Node's
 * `ServerResponse` and `Socket` fit these shapes.
 */

/** What an adapter tells the engine about its framework. */
export interface FrameworkBinding<Req> {
  /** Framework name, for messages. */
  name: string
  /** The client address as the framework sees it (after its trust-proxy rules). */
  clientIp(request: Req): string | undefined
  /**
   * Whether the request carries `X-Forwarded-For` although the framework does not trust proxies; `undefined`
   * when it carries none. The engine asks until the first request that carries one, then never again.
   */
  untrustedForwardedFor(request: Req): boolean | undefined
  /** How to enable trust-proxy in this framework, for the warning. */
  trustProxyHint: string
  /**
   * Whether the framework trusts every proxy hop (any client can then choose its key with X-Forwarded-For):
   * Express `trust proxy` true, Koa `proxy` without `maxIpsCount`, Fastify `trustProxy: true`. Asked on a
   * middleware's first request only.
   */
  permissiveTrustProxy?(request: Req): boolean
  /** How to trust only your own proxies, for the warning. */
  permissiveTrustProxyHint?: string
  /**
   * The application that serves the request (Express `req.app`, Koa `ctx.app`), where the framework tells it: a
   * middleware built anew for each request of one app is recognised and warned about (http/per-request.ts).
   */
  app?(request: Req): object | undefined
  /** The route pattern of the request (`'/users/:id'`) where the framework knows it, for observer events. */
  route?(request: Req): string | undefined
  /** Option names the adapter adds to the shared ones, e.g. `handler`. */
  options?: readonly string[]
  /**
   * Calls `listener` once when the client of `request` disconnects (at once when it already has), and returns
   * how to stop listening: a request waiting for its slot (`delay`) then gives the slot back. Adapters on Node
   * listen to the socket's `close` (`socketClosed`); without it, a waiting request keeps its slot.
   */
  onClose?(request: Req, listener: () => void): () => void
  /**
   * Whether the client of `request` has left (its connection closed). Asked only when the default key finds no
   * client address, which is how a closed connection looks on Node: such a request is not decided (`gone`), where
   * it would otherwise be `ERR_RATEWINDOW_INVALID_IP`.
   */
  gone?(request: Req): boolean
  /**
   * Whether the connection of `request` has stopped being read with the request received whole: HTTP/1.1
   * pipelining, where Node stops reading a connection whose queued responses pass its high-water mark, and a
   * client that leaves is not heard (its `close` is read only once reading resumes, and that waits for this
   * request's answer). A delayed request (`slowDown()`) whose connection is stalled when its delay ends is
   * refused instead of run. Adapters on Node answer `connectionStalled(request)`.
   */
  stalled?(request: Req): boolean
  /**
   * Sets headers on the response `target` the adapter passed to `followSettle` (its response, context or reply),
   * unless they were sent already: after `settle`, the RateLimit headers follow the settled result.
   */
  writeHeaders?(target: unknown, headers: Record<string, string>): void
  /**
   * True when the adapter writes the fields of one limiter per answer (`showFields`: the fewest requests left, or
   * the refusing one's): fields of two shapes never meet on its responses, and the engine does not watch for them
   * (`RATEWINDOW_MIXED_HEADERS`).
   */
  showsOneQuota?: boolean
}

/** Where an engine sits, from its adapter: the third argument of `new HttpRateLimiter`. */
export interface EnginePlacement {
  /**
   * What qualifies its counters besides the rules: a namespace of their own, e.g. `'GET /login'` for a Fastify
   * route limiter.
   */
  qualifier?: string
  /** @deprecated `qualifier`; this name stays until 1.0. */
  scope?: string
  /** Names the options object in messages. @default 'rateLimit()' */
  where?: string
  /** The superseded warning's advice for two engines meant to serve (see `Identity.sharing`). */
  sharing?: string
  /**
   * Engines of one owner may count on one namespace together, each with its own options: a Fastify route that
   * counts in its plugin's budget is one more engine on the plugin's counters, not a newer limiter taking them
   * over (`RATEWINDOW_SUPERSEDED_LIMITER`). @default the engine itself
   */
  owner?: object
}

/** @deprecated `EnginePlacement`; this name stays until 1.0. */
export type EngineScope = EnginePlacement

/**
 * The part of a response the engine reads to decide a refund: Node's `ServerResponse` fits, without core's
 * public types depending on Node's.
 */
export interface TrackedResponse {
  readonly statusCode: number
  /** True once the whole response was handed to the operating system. */
  readonly writableFinished: boolean
  /** True once the application called `end()`: its handler ended the response, sent or not. */
  readonly writableEnded?: boolean
  /** Whether the connection is gone already (a closed response emits no more events). */
  readonly destroyed?: boolean
  once(event: 'finish' | 'close', listener: () => void): unknown
}

/**
 * Hands the engine's work after the response (a refund, a slot's release) to the runtime, e.g. a Worker's
 * `executionCtx.waitUntil`, which would otherwise stop it once the response is sent. The promise never rejects.
 */
export type Defer = (work: Promise<unknown>) => void

/** The part of a Node socket `socketClosed` uses (core's types do not depend on Node's). */
export interface ClosableSocket {
  readonly destroyed?: boolean
  once(event: 'close', listener: () => void): unknown
  removeListener(event: 'close', listener: () => void): unknown
}

/** The listeners `socketClosed` holds for each socket: one `close` listener on the socket runs them all. */
const closeListeners = new WeakMap<ClosableSocket, Set<() => void>>()

/**
 * `FrameworkBinding.onClose` for a Node socket: `listener` runs once when it closes (at once, on a microtask, when
 * it is closed already); the answer stops listening.
 *
 * NOTE: one `close` listener per socket, however many requests wait on it: a client that pipelines thousands of
 * requests on one connection would otherwise add a listener each (Node's MaxListenersExceededWarning for every
 * such socket, and a removal that scans them all).
 */
export function socketClosed(socket: ClosableSocket | undefined, listener: () => void): () => void {
  if (socket === undefined) return () => {}
  if (socket.destroyed === true) {
    queueMicrotask(listener)
    return () => {}
  }
  let listeners = closeListeners.get(socket)
  if (listeners === undefined) {
    const waiting = new Set<() => void>()
    closeListeners.set(socket, waiting)
    socket.once('close', () => {
      closeListeners.delete(socket)
      for (const each of waiting) each()
    })
    listeners = waiting
  }
  const own = listeners
  // A listener added twice still runs once per call: each call gets its own entry.
  const entry = () => listener()
  own.add(entry)
  return () => {
    own.delete(entry)
  }
}

/** The part of Node's `IncomingMessage` `connectionStalled` reads (core's types do not depend on Node's). */
export interface ReceivedMessage {
  /** True once the whole request was received. */
  readonly complete?: boolean
  readonly socket?: { isPaused?(): boolean } | null
}

/**
 * `FrameworkBinding.stalled` for a Node request: received whole, on a connection Node has paused. A request whose
 * own body is still coming (an upload the app has not read yet pauses its socket too) is not stalled.
 *
 * NOTE: Node's HTTP server pauses a connection only while the responses queued on it pass the socket's
 * high-water mark, or while a body is not read: with the request whole, the pause is the queue of a client that
 * pipelined more than the server answers, and only answering the request at the head of that queue resumes it:
 * that one is not stalled (at most one handler per connection runs for a client that may have left).
 */
export function connectionStalled(message: ReceivedMessage | undefined): boolean {
  if (message?.complete !== true || message.socket?.isPaused?.() !== true) return false
  // The request whose answer Node writes next (the head of the connection's queue) waits on nothing: answering it
  // is what resumes the connection (held, honest pipelining clients would wait for a 429). NOTE: `_httpMessage` is Node's own (the response attached to the socket); where it is missing, every
  // request of a paused connection counts as stalled.
  const head = (message.socket as { _httpMessage?: { req?: unknown } | null })._httpMessage
  return head?.req !== message
}

/** The framework's route of the request, for observer events; none without `route`, or when it throws. */
export function routeOf<Req>(binding: FrameworkBinding<Req>, request: Req): string | undefined {
  try {
    return binding.route?.(request)
  } catch {
    return undefined
  }
}

/**
 * `FrameworkBinding.permissiveTrustProxy` for a framework whose request has an `ip` getter on its prototype that
 * reads X-Forwarded-For by the app's trust setting (Fastify's, also under Nest): whether it trusts every hop
 * (`trustProxy: true`), probed once on a synthetic request through that getter.
 */
export function trustsEveryHop(request: object): boolean {
  const getter = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(request), 'ip')?.get
  if (getter === undefined) return false
  const hops = Array.from({ length: 30 }, (_, i) => `198.51.100.${i + 1}`).join(', ')
  const headers = { 'x-forwarded-for': `203.0.113.7, ${hops}` }
  const socket = { remoteAddress: '192.0.2.1' }
  try {
    return getter.call({ raw: { headers, socket, connection: socket }, headers }) === '203.0.113.7'
  } catch {
    return false
  }
}
