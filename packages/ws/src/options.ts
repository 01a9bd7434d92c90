/**
 * The options every binding shares (ws, Socket.IO, Hono), resolved once: defaults in `WEBSOCKET_DEFAULTS`, every
 * value checked at construction with core's validation toolkit.
 */
import type {
  Awaitable,
  ConcurrencyLimiterOptions,
  HttpRateLimitOptions,
  RateLimiterOptions,
} from '@ratewindow/core'
import { invalid, namesOf, rejectUnknownOptions, requireObject } from '@ratewindow/core/support'

/**
 * The HTTP limit on the upgrade request (Socket.IO: the handshake request): the options of the HTTP adapters, on
 * the shared engine. A refused upgrade is answered with the status, the RateLimit headers and the body the HTTP
 * adapters send. The key is the connection's (`key`, `ipv6Subnet` at the top level); options that judge a
 * response (`skipFailedRequests`, `concurrency`, `delay`…) do not apply to an upgrade.
 */
export type UpgradeLimitOptions<Req> = Omit<
  HttpRateLimitOptions<Req>,
  | 'key'
  | 'ipv6Subnet'
  | 'concurrency'
  | 'delay'
  | 'reservationHorizon'
  | 'skipFailedRequests'
  | 'skipSuccessfulRequests'
  | 'requestWasSuccessful'
>

/** Open connections per key: core's `ConcurrencyLimiter`, one slot per open connection. */
export interface ConnectionLimitOptions
  extends Omit<ConcurrencyLimiterOptions, 'lease' | 'prefix' | 'renew'> {
  /**
   * How long a slot lives in the store unless renewed. An open connection renews its slot every half lease (it
   * gives the slot back and takes it again), so the limit holds for connections of any age, and a process that
   * dies holding connections gives their slots back within one lease. @default '10m'
   */
  lease?: ConcurrencyLimiterOptions['lease']
  /** Namespace of the slots in the store. @default 'rw-ws' */
  prefix?: string
}

/** Why a message (or a Socket.IO connection) was refused. */
export type RefusalReason =
  /** A limit refused it (the message limits' rules, the upgrade limit's, a penalty, a blocked key). */
  | 'limit'
  /** `maxPending` messages of the connection were waiting for the store already, or the store shed the decision. */
  | 'busy'
  /** The store failed and the failure policy (`onStoreError: 'deny'`) refused it. */
  | 'unavailable'
  /** Socket.IO's `connect_error` only: the key had `connections.limit` connections open already. */
  | 'connections'

/** A refused message, as the client is told (drop) or as the close reason says (close). */
export interface MessageRefusal {
  reason: RefusalReason
  /**
   * Wait in seconds, rounded up (as HTTP's `Retry-After`), until a message of the same cost would pass; 0 when
   * unknown (busy, unavailable).
   */
  retryAfter: number
  /** The same wait in milliseconds. */
  retryAfterMs: number
}

/** The options of every binding: `Req` is the request the binding reads the key from, `Msg` one message. */
export interface WebSocketLimitOptions<Req, Msg> {
  /**
   * The client's key, from the upgrade request (the same for the upgrade limit, the connection limit and the
   * per-key message limit). @default the client address (the binding's, after its trust rules), IPv6 masked to
   * `ipv6Subnet`
   */
  key?: (request: Req) => Awaitable<string>
  /** IPv6 prefix length the default key groups clients by; `false` for full addresses. @default 56 */
  ipv6Subnet?: number | false
  /**
   * The HTTP limit on the upgrade request, answered with status and headers (its `prefix` defaults to
   * `'rw-ws-upgrade'`). @default none
   */
  upgrade?: UpgradeLimitOptions<Req>
  /** Open connections per key; an upgrade past it is refused with `statusCode` and `Retry-After`. @default none */
  connections?: ConnectionLimitOptions
  /**
   * Messages per connection: any rules, any store (`RateLimiterOptions`; its `prefix` defaults to
   * `'rw-ws-connection'`). A connection lives in one process: the memory store fits. @default none
   */
  messagesPerConnection?: RateLimiterOptions
  /**
   * Messages per key, across the key's connections: any rules, any store (its `prefix` defaults to
   * `'rw-ws-key'`); a shared store (Redis) counts them across processes. @default none
   */
  messagesPerKey?: RateLimiterOptions
  /** What one message costs against the message limits: whole units, or a function of the message. @default 1 */
  cost?: number | ((message: Msg) => number)
  /**
   * Past a message limit: `'drop'` drops the message and tells the client (an error frame for `ws` and Hono, an
   * error event or the acknowledgement for Socket.IO); `'close'` closes the connection with code 1008 (Socket.IO:
   * tells the client, then disconnects it). @default 'drop'
   */
  onLimit?: 'drop' | 'close'
  /**
   * Messages of one connection waiting for their decision at once (a store call in flight); one more is refused
   * at once as `'busy'`, without a store call. Waiting messages keep their data: with ws's `maxPayload`, this
   * bounds what a connection holds. Messages are delivered in the order they arrived. @default 64
   */
  maxPending?: number
  /** The reason of a 1008 close, cut to 123 bytes of UTF-8. @default 'rate limited' */
  closeReason?: string | ((refusal: MessageRefusal) => string)
  /**
   * Refusals a connection may get while it is not reading (its outgoing buffer over the binding's bound:
   * `maxBufferedAmount`, Socket.IO's `maxWriteBuffer`), before it is closed with 1008 and `closeReason`. While it
   * is over the bound it gets no refusal reply; otherwise at most one a second. @default 100
   */
  maxUnreadRefusals?: number
  /**
   * The current time in ms (any origin: only differences count), which paces refusal replies to one a second
   * per connection. Inject one to drive it in tests. @default performance.now
   */
  clock?: () => number
  /** Receives what fails out of the client's sight: a `cost` function that throws. @default console.error */
  onError?: (error: unknown) => void
}

/** The bound on a `ws` socket's outgoing buffer (ws, @fastify/websocket, Hono), past which refusals go unanswered. */
export interface BufferedAmountOptions {
  /**
   * Bytes a connection's outgoing buffer (`bufferedAmount`) may hold for a refusal reply to be sent: past it the
   * client is not reading what it was sent, and its refusals go unanswered (`maxUnreadRefusals` of them close
   * it). @default 65536 (64 KiB)
   */
  maxBufferedAmount?: number
}

/** `WebSocketLimitOptions`' defaults, in one place (the `@default` tags above say the same). */
export const WEBSOCKET_DEFAULTS = {
  cost: 1,
  onLimit: 'drop',
  maxPending: 64,
  closeReason: 'rate limited',
  maxUnreadRefusals: 100,
  /** ws, @fastify/websocket, Hono: `maxBufferedAmount` (bytes). */
  maxBufferedAmount: 65_536,
  /** At most one refusal reply per connection in this many ms (not an option). */
  replyInterval: 1_000,
  connectionLease: '10m',
  connectionPrefix: 'rw-ws',
  upgradePrefix: 'rw-ws-upgrade',
  perConnectionPrefix: 'rw-ws-connection',
  perKeyPrefix: 'rw-ws-key',
} as const

/** The option names every binding shares; a binding adds its own. */
export const SHARED_OPTIONS = namesOf<WebSocketLimitOptions<unknown, unknown>>({
  key: true,
  ipv6Subnet: true,
  upgrade: true,
  connections: true,
  messagesPerConnection: true,
  messagesPerKey: true,
  cost: true,
  onLimit: true,
  maxPending: true,
  closeReason: true,
  maxUnreadRefusals: true,
  clock: true,
  onError: true,
})

/** Upgrade options that judge a response or wait: refused with advice, not passed on. */
const NOT_FOR_UPGRADES = [
  'key',
  'ipv6Subnet',
  'concurrency',
  'delay',
  'skipFailedRequests',
  'skipSuccessfulRequests',
  'requestWasSuccessful',
] as const

/** The options resolved: complete and checked (the limiters' own options are checked by their classes). */
export interface WebSocketConfig<Req, Msg> {
  key: ((request: Req) => Awaitable<string>) | undefined
  ipv6Subnet: number | false | undefined
  upgrade: UpgradeLimitOptions<Req> | undefined
  connections: ConcurrencyLimiterOptions | undefined
  messagesPerConnection: RateLimiterOptions | undefined
  messagesPerKey: RateLimiterOptions | undefined
  cost: number | ((message: Msg) => number)
  close: boolean
  maxPending: number
  closeReason: string | ((refusal: MessageRefusal) => string)
  maxUnreadRefusals: number
  clock: () => number
  onError: (error: unknown) => void
}

/** Resolves the shared options; `names` are the binding's own, `where` names the call in messages. */
export function resolveWebSocketOptions<Req, Msg>(
  options: WebSocketLimitOptions<Req, Msg>,
  names: readonly string[],
  where: string,
): WebSocketConfig<Req, Msg> {
  requireObject(
    options,
    'options',
    "{ messagesPerConnection: { rules: fixedWindow({ limit: 20, window: '1s' }) } }",
  )
  rejectUnknownOptions(options, [...SHARED_OPTIONS, ...names], where)
  const {
    key,
    upgrade,
    connections,
    cost = WEBSOCKET_DEFAULTS.cost,
    onLimit = WEBSOCKET_DEFAULTS.onLimit,
    maxPending = WEBSOCKET_DEFAULTS.maxPending,
    closeReason = WEBSOCKET_DEFAULTS.closeReason,
    maxUnreadRefusals = WEBSOCKET_DEFAULTS.maxUnreadRefusals,
    clock = () => performance.now(),
    onError = (error: unknown) => console.error('@ratewindow/ws:', error),
  } = options
  for (const [name, value] of [
    ['key', key],
    ['clock', clock],
    ['onError', onError],
  ] as const) {
    if (value !== undefined && typeof value !== 'function')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, value, 'a function')
  }
  if (typeof cost !== 'function' && !(Number.isSafeInteger(cost) && cost >= 0))
    throw invalid(
      'ERR_RATEWINDOW_INVALID_COST',
      'cost',
      cost,
      'a whole number >= 0, or a function of the message',
    )
  if (onLimit !== 'drop' && onLimit !== 'close')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'onLimit', onLimit, "'drop' or 'close'")
  checkCount('maxPending', maxPending, 1, WEBSOCKET_DEFAULTS.maxPending)
  checkCount('maxUnreadRefusals', maxUnreadRefusals, 1, WEBSOCKET_DEFAULTS.maxUnreadRefusals)
  if (typeof closeReason !== 'string' && typeof closeReason !== 'function')
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'closeReason',
      closeReason,
      'a string, or a function of the refusal',
    )
  if (upgrade !== undefined) {
    requireObject(upgrade, 'upgrade', "{ limit: 30, window: '1m' }")
    const misplaced = NOT_FOR_UPGRADES.find(
      (name) => (upgrade as Record<string, unknown>)[name] !== undefined,
    )
    if (misplaced !== undefined) {
      const allowed =
        misplaced === 'key' || misplaced === 'ipv6Subnet'
          ? `absent: \`${misplaced}\` is a top-level option (one key for the upgrade, the connection and its messages)`
          : 'absent: it judges a response, and an upgrade has none'
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        `upgrade.${misplaced}`,
        upgrade[misplaced as never],
        allowed,
      )
    }
  }
  if (connections !== undefined) requireObject(connections, 'connections', '{ limit: 5 }')
  const messages = [options.messagesPerConnection, options.messagesPerKey]
  for (const [i, each] of messages.entries()) {
    if (each !== undefined)
      requireObject(
        each,
        i === 0 ? 'messagesPerConnection' : 'messagesPerKey',
        "{ rules: fixedWindow({ limit: 20, window: '1s' }) }",
      )
  }
  return {
    key,
    ipv6Subnet: options.ipv6Subnet,
    upgrade,
    connections:
      connections === undefined
        ? undefined
        : {
            ...connections,
            lease: connections.lease ?? WEBSOCKET_DEFAULTS.connectionLease,
            prefix: connections.prefix ?? WEBSOCKET_DEFAULTS.connectionPrefix,
          },
    messagesPerConnection: withPrefix(options.messagesPerConnection, WEBSOCKET_DEFAULTS.perConnectionPrefix),
    messagesPerKey: withPrefix(options.messagesPerKey, WEBSOCKET_DEFAULTS.perKeyPrefix),
    cost,
    close: onLimit === 'close',
    maxPending,
    closeReason,
    maxUnreadRefusals,
    clock,
    onError,
  }
}

/** Checks a count option: a whole number of at least `min` (`example` shows one in the message). */
export function checkCount(name: string, value: unknown, min: 0 | 1, example: number): void {
  if (!Number.isSafeInteger(value) || (value as number) < min)
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, value, `a whole number >= ${min} such as ${example}`)
}

/** Each message limiter counts in its own namespace unless its options name one. */
function withPrefix(options: RateLimiterOptions | undefined, prefix: string): RateLimiterOptions | undefined {
  return options === undefined ? undefined : { ...options, prefix: options.prefix ?? prefix }
}
