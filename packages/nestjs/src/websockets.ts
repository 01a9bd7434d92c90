/**
 * `@ratewindow/nestjs/websockets`: message limits on NestJS gateways (`@nestjs/websockets`, on the Socket.IO and
 * `ws` platforms), opt-in beside the HTTP guard, which lets WebSocket contexts through. The decisions are
 * `@ratewindow/ws`'s engine (`WebSocketLimiter`); this file reads Nest's contexts and answers Nest's way.
 */
import type { IncomingMessage } from 'node:http'
import {
  type CanActivate,
  type DynamicModule,
  type ExecutionContext,
  Inject,
  Injectable,
  Module,
  type OnApplicationShutdown,
} from '@nestjs/common'
import { WsException } from '@nestjs/websockets'
import { RateLimitError } from '@ratewindow/core'
import { type FrameworkBinding, rateLimiterOptionsFrom } from '@ratewindow/core/adapter'
import {
  type LimitedConnection,
  type MessageRefusal,
  refusalMessage,
  WebSocketLimiter,
  type WebSocketLimitOptions,
} from '@ratewindow/ws/engine'
import { RATE_LIMIT_METADATA, reflector, SKIP_RATE_LIMIT_METADATA } from './decorators.js'
import {
  mergeOptions,
  moduleLimiters,
  type RateWindowModuleOptions,
  type RateWindowOptions,
} from './options.js'
import { RATEWINDOW_OPTIONS } from './service.js'
import { type BacklogBounds, type BufferedClient, ClientBacklog } from './ws-backlog.js'
import {
  checkWsOptions,
  type NestWsMessage,
  RATEWINDOW_WS_DEFAULTS,
  type RateWindowWsOptions,
} from './ws-options.js'

export { type NestWsMessage, RATEWINDOW_WS_DEFAULTS, type RateWindowWsOptions } from './ws-options.js'

export const RATEWINDOW_WS_OPTIONS = 'RATEWINDOW_WS_OPTIONS'

/** A refused message: a `WsException` whose error is `{ error: 'rate_limited', reason, retryAfter }`. */
export class RateLimitWsException extends WsException {
  readonly refusal: MessageRefusal

  constructor(refusal: MessageRefusal) {
    super(refusalMessage(refusal))
    this.name = 'RateLimitWsException'
    this.refusal = refusal
  }
}

/** The sockets Nest hands a gateway: a Socket.IO socket, or a `ws` WebSocket. */
interface GatewayClient extends BufferedClient {
  /** Socket.IO's handshake request. */
  request?: IncomingMessage
  once(event: string, listener: () => void): unknown
  close?(code: number, reason: string): unknown
  emit?(event: string, payload: unknown): unknown
  disconnect?(close: boolean): unknown
}

/** The handshake requests of `ws` clients, which Nest gives only to `handleConnection(client, request)`. */
const handshakes = new WeakMap<object, IncomingMessage>()

/**
 * On `@nestjs/platform-ws`, the guard needs each client's handshake request, which Nest passes to the gateway's
 * `handleConnection(client, request)` only: call `rememberHandshake(client, request)` there. Socket.IO needs
 * nothing (`socket.request`).
 */
export function rememberHandshake(client: object, request: IncomingMessage): void {
  handshakes.set(client, request)
}

// biome-ignore lint/complexity/noBannedTypes: Nest identifies gateways and handlers by their functions
type Fn = Function

/** One limiter of a handler: the engine, and the connections it admitted, by client. */
interface HandlerLimiter {
  engine: WebSocketLimiter<IncomingMessage, NestWsMessage>
  connections: WeakMap<object, Promise<LimitedConnection<NestWsMessage>>>
}

/**
 * The gateway guard: `@UseGuards(RateWindowWsGuard)` on a gateway or a `@SubscribeMessage` handler. Each message
 * of the handlers it covers is decided by the module's limiters (`limit`, `window`, `algorithm` or `rules`,
 * `store`…), merged with the handler's or gateway's `@RateLimit()` as on HTTP routes, and counted per handler,
 * per connection (or per key: `per`). `@SkipRateLimit()` exempts a handler. Contexts other than WebSockets pass.
 */
export class RateWindowWsGuard implements CanActivate, OnApplicationShutdown {
  readonly #module: RateWindowModuleOptions
  readonly #options: RateWindowWsOptions
  readonly #byHandler = new WeakMap<Fn, HandlerLimiter[]>()
  readonly #engines: WebSocketLimiter<IncomingMessage, NestWsMessage>[] = []
  readonly #bounds: BacklogBounds
  /** Each client's outgoing buffer, shared by the limiters of its handlers. */
  readonly #backlogs = new WeakMap<object, ClientBacklog>()

  constructor(module: RateWindowModuleOptions, options: RateWindowWsOptions) {
    this.#module = module
    this.#options = options
    const {
      maxWriteBuffer = RATEWINDOW_WS_DEFAULTS.maxWriteBuffer,
      maxBufferedAmount = RATEWINDOW_WS_DEFAULTS.maxBufferedAmount,
    } = options
    this.#bounds = { maxWriteBuffer, maxBufferedAmount }
  }

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    if (context.getType() !== 'ws') return true
    const limiters = this.#limitersFor(context.getClass(), context.getHandler())
    if (limiters.length === 0) return true
    const ws = context.switchToWs()
    const client = ws.getClient<GatewayClient>()
    const message = { event: String(ws.getPattern()), data: ws.getData() }
    const ack = context.getArgs()[2]
    const backlog = this.#backlogOf(client)
    return Promise.all(limiters.map((each) => this.#connectionOf(each, client, backlog))).then(
      (connections) => decide(connections, message, backlog, typeof ack === 'function' ? ack : undefined),
    )
  }

  onApplicationShutdown(): void {
    for (const engine of this.#engines.splice(0)) engine.close()
  }

  #backlogOf(client: GatewayClient): ClientBacklog {
    let backlog = this.#backlogs.get(client)
    if (backlog === undefined) {
      backlog = new ClientBacklog(client, this.#bounds)
      this.#backlogs.set(client, backlog)
    }
    return backlog
  }

  #connectionOf(
    limiter: HandlerLimiter,
    client: GatewayClient,
    backlog: ClientBacklog,
  ): Promise<LimitedConnection<NestWsMessage>> {
    let connection = limiter.connections.get(client)
    if (connection === undefined) {
      connection = admit(limiter.engine, client, backlog)
      limiter.connections.set(client, connection)
    }
    return connection
  }

  #limitersFor(gateway: Fn, handler: Fn): HandlerLimiter[] {
    let limiters = this.#byHandler.get(handler)
    if (limiters === undefined) {
      limiters = this.#resolve(gateway, handler).map((engine) => ({ engine, connections: new WeakMap() }))
      this.#byHandler.set(handler, limiters)
    }
    return limiters
  }

  /** The module's limiters for a handler, each merged with the gateway's and the handler's `@RateLimit()`. */
  #resolve(gateway: Fn, handler: Fn): WebSocketLimiter<IncomingMessage, NestWsMessage>[] {
    const skipped = [handler, gateway].map((target) =>
      reflector.get<true | string[] | undefined>(SKIP_RATE_LIMIT_METADATA, target),
    )
    if (skipped.includes(true)) return []
    const skips = new Set(skipped.flatMap((each) => (Array.isArray(each) ? each : [])))
    const { limiters, named } = moduleLimiters(this.#module)
    const only = limiters.size === 1 ? [...limiters.keys()][0] : undefined
    const merged = new Map(limiters)
    for (const target of [gateway, handler]) {
      for (const options of reflector.get<RateWindowOptions[] | undefined>(RATE_LIMIT_METADATA, target) ??
        []) {
        const name = named ? (options.name ?? only) : only
        if (name === undefined)
          throw new RateLimitError(
            'ERR_RATEWINDOW_INVALID_OPTION',
            `@RateLimit() of ${target.name} needs a \`name\`: the module has several limiters (${[...limiters.keys()].join(', ')}).`,
            { option: 'name' },
          )
        // A name the module does not have adds a limiter on the module's shared options (as on HTTP routes).
        merged.set(name, mergeOptions(merged.get(name) ?? this.#shared(), { ...options, name }))
      }
    }
    const where = `${gateway.name}.${handler.name}`
    const engines: WebSocketLimiter<IncomingMessage, NestWsMessage>[] = []
    for (const [name, options] of merged) {
      if (skips.has(name) || options.enabled === false) continue
      engines.push(this.#engine(where, name, options))
    }
    return engines
  }

  #shared(): RateWindowOptions {
    const { limiters: _limiters, perRoute: _perRoute, ...shared } = this.#module
    return shared
  }

  #engine(
    where: string,
    name: string,
    options: RateWindowOptions,
  ): WebSocketLimiter<IncomingMessage, NestWsMessage> {
    const {
      per = RATEWINDOW_WS_DEFAULTS.per,
      key = options.key,
      maxWriteBuffer: _maxWriteBuffer,
      maxBufferedAmount: _maxBufferedAmount,
      ...rest
    } = this.#options
    const { key: _key, ipv6Subnet, ...limiter } = options
    const messages = rateLimiterOptionsFrom(
      { ...limiter, prefix: `${limiter.prefix ?? 'rw-ws-nest'}:${where}@${name}` },
      `@RateLimit() of ${where}`,
    )
    const engine = new WebSocketLimiter<IncomingMessage, NestWsMessage>(
      {
        ...rest,
        key: key as WebSocketLimitOptions<IncomingMessage, NestWsMessage>['key'],
        ipv6Subnet,
        [per === 'key' ? 'messagesPerKey' : 'messagesPerConnection']: messages,
      },
      handshakeBinding,
      [],
      'RateWindowWsGuard',
    )
    this.#engines.push(engine)
    return engine
  }
}

/** Admits a client once per limiter: its key from the handshake request; its limits end when it goes. */
async function admit(
  engine: WebSocketLimiter<IncomingMessage, NestWsMessage>,
  client: GatewayClient,
  backlog: ClientBacklog,
): Promise<LimitedConnection<NestWsMessage>> {
  const request = client.request ?? handshakes.get(client)
  if (request === undefined)
    throw new Error(
      'RateWindowWsGuard needs the handshake request: on @nestjs/platform-ws, call ' +
        'rememberHandshake(client, request) in the gateway’s handleConnection(client, request).',
    )
  const admission = await engine.admit(request)
  // No upgrade limit and no connection limit are set: every admission opens a connection.
  if (!admission.allowed) throw new RateLimitWsException({ reason: 'limit', retryAfter: 0, retryAfterMs: 0 })
  const { connection } = admission
  const waiting = new Set<() => void>()
  pending.set(connection, waiting)
  /** The connection is over: the guards of its messages still waiting settle (false), holding nothing. */
  const end = () => {
    connection.close()
    for (const settle of waiting) settle()
    waiting.clear()
  }
  connection.attach(
    (code, reason, refusal) => {
      const unread = backlog.backlogged()
      end()
      if (typeof client.disconnect === 'function') {
        client.emit?.('exception', refusalMessage(refusal))
        // A client that is not reading is disconnected at once: Nest's replies to the rest of its flood, queued
        // in this turn, then go nowhere. Otherwise after the replies to the messages admitted before the close.
        if (unread) client.disconnect(true)
        else process.nextTick(() => client.disconnect?.(true))
      } else client.close?.(code, reason)
    },
    () => backlog.backlogged(),
  )
  client.once(typeof client.disconnect === 'function' ? 'disconnect' : 'close', end)
  return connection
}

/** The guards waiting on each connection's decisions, settled when it ends. */
const pending = new WeakMap<LimitedConnection<NestWsMessage>, Set<() => void>>()

/**
 * Decides one message with every limiter of its handler (all must admit it). A refusal rejects with
 * `RateLimitWsException` (and answers a Socket.IO acknowledgement); a connection closed meanwhile resolves false.
 */
function decide(
  connections: LimitedConnection<NestWsMessage>[],
  message: NestWsMessage,
  backlog: ClientBacklog,
  ack: ((answer: unknown) => void) | undefined,
): Promise<boolean> {
  let chain: Promise<boolean> = Promise.resolve(true)
  for (const connection of connections) {
    chain = chain.then((allowed) => (allowed ? one(connection, message, backlog, ack) : false))
  }
  return chain
}

function one(
  connection: LimitedConnection<NestWsMessage>,
  message: NestWsMessage,
  backlog: ClientBacklog,
  ack: ((answer: unknown) => void) | undefined,
): Promise<boolean> {
  return new Promise((resolve, reject) => {
    if (connection.closed) return resolve(false)
    const waiting = pending.get(connection)
    // A message dropped because its connection ended (the client left, or `onLimit: 'close'`) is neither
    // delivered nor refused: its guard settles (false) when the connection ends.
    const gone = () => resolve(false)
    waiting?.add(gone)
    connection.receive(
      message,
      () => {
        waiting?.delete(gone)
        resolve(true)
      },
      (refusal, reply) => {
        waiting?.delete(gone)
        // Nest's filter answers the rejection with an `exception` event, whatever the guard does; the
        // acknowledgement is answered only when a reply is due (at most one a second, none while not reading).
        backlog.told(refusal)
        if (reply) ack?.(refusalMessage(refusal))
        reject(new RateLimitWsException(refusal))
      },
    )
  })
}

/** The handshake request's address: the socket's (the HTTP platform's trust-proxy rules do not reach it). */
const handshakeBinding: FrameworkBinding<IncomingMessage> = {
  name: 'NestJS gateway',
  clientIp: (request) => request.socket?.remoteAddress,
  untrustedForwardedFor: () => undefined,
  trustProxyHint: 'pass `key` to RateWindowWsModule.forRoot()',
}

/**
 * The gateway guard's module: `RateWindowWsModule.forRoot()` beside `RateWindowModule.forRoot()` (whose limiters
 * it applies to messages), then `@UseGuards(RateWindowWsGuard)` on the gateways or handlers to limit.
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class, its dynamic form a static method
export class RateWindowWsModule {
  static forRoot(options: RateWindowWsOptions = {}): DynamicModule {
    checkWsOptions(options)
    return {
      module: RateWindowWsModule,
      global: true,
      providers: [{ provide: RATEWINDOW_WS_OPTIONS, useValue: options }, RateWindowWsGuard],
      exports: [RATEWINDOW_WS_OPTIONS, RateWindowWsGuard],
    }
  }
}
Module({})(RateWindowWsModule)
Injectable()(RateWindowWsGuard)
Inject(RATEWINDOW_OPTIONS)(RateWindowWsGuard, undefined, 0)
Inject(RATEWINDOW_WS_OPTIONS)(RateWindowWsGuard, undefined, 1)
