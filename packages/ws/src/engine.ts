/**
 * `WebSocketLimiter`, the one engine every binding (ws and @fastify/websocket, Socket.IO, Hono) runs: an upgrade
 * request is admitted (its key, the HTTP limit through core's HTTP engine, a connection slot through core's
 * `ConcurrencyLimiter`) into a `LimitedConnection`, whose messages the message limiters (core's `RateLimiter`)
 * decide. Bindings read their server's requests and sockets and write what this returns.
 */
import { type Awaitable, ConcurrencyLimiter, ipKey, RateLimitError, RateLimiter } from '@ratewindow/core'
import {
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  NO_SLOT_RETRY_AFTER_MS,
} from '@ratewindow/core/adapter'
import { LimitedConnection, type MessageCounter } from './connection.js'
import {
  type MessageRefusal,
  resolveWebSocketOptions,
  WEBSOCKET_DEFAULTS,
  type WebSocketConfig,
  type WebSocketLimitOptions,
} from './options.js'
import { messageRefusal, type UpgradeRefusal } from './refusal.js'

/**
 * An upgrade request's answer: a connection to open, or the HTTP refusal to send, with why in the terms of a
 * message refusal (Socket.IO sends that in its `connect_error`).
 */
export type UpgradeAdmission<Msg> =
  | { allowed: true; connection: LimitedConnection<Msg> }
  | { allowed: false; refusal: UpgradeRefusal; why: MessageRefusal }

/** @deprecated `UpgradeAdmission`; this name stays until 1.0. */
export type Admission<Msg> = UpgradeAdmission<Msg>

/** The engine of one limits object: its limiters, made once from options resolved once. */
export class WebSocketLimiter<Req, Msg> {
  readonly #config: WebSocketConfig<Req, Msg>
  readonly #binding: FrameworkBinding<Req>
  /** The HTTP limit on upgrade requests (option `upgrade`): core's HTTP engine, keyed by the connection's key. */
  readonly #upgrade: HttpRateLimiter<Req> | undefined
  readonly #slots: ConcurrencyLimiter | undefined
  readonly #perConnection: RateLimiter | undefined
  readonly #perKey: RateLimiter | undefined
  /** The key of each request being admitted, for the HTTP engine's `key`. */
  readonly #keys = new WeakMap<object, string>()
  /** The status of an upgrade refused for want of a slot (the upgrade limit's `statusCode`). */
  readonly #statusCode: number

  /**
   * @param names the binding's own option names (besides the shared ones)
   * @param where how messages name the call, e.g. `'limitWebSockets()'`
   */
  constructor(
    options: WebSocketLimitOptions<Req, Msg>,
    binding: FrameworkBinding<Req>,
    names: readonly string[],
    where: string,
  ) {
    const config = resolveWebSocketOptions(options, names, where)
    this.#config = config
    this.#binding = binding
    this.#statusCode = config.upgrade?.statusCode ?? 429
    this.#upgrade =
      config.upgrade &&
      new HttpRateLimiter<Req>(
        {
          prefix: WEBSOCKET_DEFAULTS.upgradePrefix,
          ...config.upgrade,
          key: (request) => this.#keys.get(request as object) ?? '',
        },
        { ...binding, options: [] },
        { where: `${where} \`upgrade\`` },
      )
    this.#slots = config.connections && new ConcurrencyLimiter(config.connections)
    this.#perConnection = config.messagesPerConnection && new RateLimiter(config.messagesPerConnection)
    this.#perKey = config.messagesPerKey && new RateLimiter(config.messagesPerKey)
  }

  /**
   * Admits an upgrade request: its key, then the HTTP limit, then a connection slot (an upgrade refused for
   * want of a slot gets its HTTP charge back). Rejects when `key` throws or the address is unknown.
   */
  async admit(request: Req): Promise<UpgradeAdmission<Msg>> {
    const key = await this.#keyOf(request)
    if (typeof key !== 'string')
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_KEY',
        `\`key\` must return a string; returned ${typeof key}.`,
        {
          option: 'key',
        },
      )
    let decision: HttpDecision | undefined
    if (this.#upgrade !== undefined) {
      this.#keys.set(request as object, key)
      decision = await this.#upgrade.decide(request)
      if (decision !== undefined && !decision.result.allowed) {
        const { contentType, payload } = await this.#upgrade.body(request, decision)
        const { statusCode, headers, result } = decision
        const why = messageRefusal(result.source === 'policy' ? 'unavailable' : 'limit', result.retryAfter)
        return { allowed: false, refusal: { statusCode, headers, contentType, body: payload }, why }
      }
    }
    const slot = await this.#slots?.acquire(key)
    if (slot !== undefined && !slot.allowed) {
      void decision?.result.settle?.(0)
      const policy = slot.source === 'policy'
      const statusCode = policy ? 503 : this.#statusCode
      const body = JSON.stringify({ error: 'too many connections', limit: slot.limit })
      // A connection slot's wait, as the HTTP engine's `concurrency` answers it.
      const headers = { 'Retry-After': String(NO_SLOT_RETRY_AFTER_MS / 1000) }
      const why = messageRefusal(policy ? 'unavailable' : 'connections', NO_SLOT_RETRY_AFTER_MS)
      return { allowed: false, refusal: { statusCode, headers, contentType: 'application/json', body }, why }
    }
    return { allowed: true, connection: this.#connection(key, slot) }
  }

  /**
   * Gives up this engine's counters to the limiters that replace it (an app rebuilt in tests, a reloaded
   * module, shutdown) and closes the stores it made for itself. Open connections keep their limits.
   */
  close(): void {
    this.#upgrade?.close()
    this.#perConnection?.release()
    this.#perKey?.release()
  }

  /** The connection key: the `key` option's, or the client address the binding gives, IPv6 masked. */
  #keyOf(request: Req): Awaitable<string> {
    const { key, ipv6Subnet } = this.#config
    if (key !== undefined) return key(request)
    return ipKey(this.#binding.clientIp(request) ?? '', { ipv6Subnet })
  }

  #connection(key: string, slot: Awaited<ReturnType<ConcurrencyLimiter['acquire']>> | undefined) {
    const counters: MessageCounter[] = []
    if (this.#perConnection !== undefined)
      counters.push({
        limiter: this.#perConnection,
        key: `${key}:${globalThis.crypto.randomUUID()}`,
        perKey: false,
      })
    if (this.#perKey !== undefined) counters.push({ limiter: this.#perKey, key, perKey: true })
    return new LimitedConnection<Msg>(
      key,
      this.#config as WebSocketConfig<unknown, Msg>,
      counters,
      this.#slots,
      slot,
    )
  }
}
