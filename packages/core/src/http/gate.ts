/**
 * The gate of the request pipeline: the deny lists, `skip` and the allow lists, by the client's IP and by key,
 * and the key itself. What passes goes on to be limited; the rest is refused or skipped here, before any store
 * call.
 */
import type { RateLimiter } from '../limiter/limiter.js'
import type { Awaitable } from '../stores/types.js'
import type { FrameworkBinding } from './binding.js'
import type { HttpConfig } from './config.js'
import type { DecisionWriter, HttpDecision } from './decision.js'
import { IpKeys } from './keys.js'
import { ProxyWarnings } from './proxy-warnings.js'
import { step } from './step.js'

/** The gate's answers for a request that goes on: to be limited, or to pass unless its key is deny-listed. */
export const GO_ON = Symbol('go on')
export const ALLOWED_IP = Symbol('allow-listed IP')
/** The client left before its request was decided: there is nothing to key, decide or answer. */
export const GONE = Symbol('client gone')
/** What the gate says: a denial, skipped (undefined), or go on. */
export type Passage = HttpDecision | undefined | typeof GO_ON | typeof ALLOWED_IP

/** One middleware's gate. `first`: the limiter a deny-listed result names (none before any). */
export class AccessGate<Req> {
  readonly #config: HttpConfig<Req>
  readonly #binding: FrameworkBinding<Req>
  readonly #writer: DecisionWriter<Req>
  readonly #first: () => RateLimiter | undefined
  readonly #proxyWarnings: ProxyWarnings<Req>
  /** The default key, the client IP (IPv6 masked): `ipv6Subnet` parsed once, recent IPv6 keys remembered. */
  readonly #ipKeys: IpKeys

  constructor(
    config: HttpConfig<Req>,
    binding: FrameworkBinding<Req>,
    writer: DecisionWriter<Req>,
    first: () => RateLimiter | undefined,
  ) {
    this.#config = config
    this.#binding = binding
    this.#writer = writer
    this.#first = first
    this.#proxyWarnings = new ProxyWarnings(binding)
    this.#ipKeys = new IpKeys(config.ipv6Subnet)
  }

  /**
   * The deny lists, `skip`, the allow list by IP. Deny wins over skip (and over the allow list): a `denyList`
   * function is asked first, and a skipped request the deny list names is still refused.
   */
  pass(request: Req): Awaitable<Passage> {
    const { denyWhen } = this.#config
    if (denyWhen === undefined) return this.#unlessSkipped(request)
    return step(denyWhen(request), (denied) =>
      denied ? this.#denied(this.#binding.clientIp(request) ?? '') : this.#unlessSkipped(request),
    )
  }

  /** The proxy settings judged on `request` (once: see ProxyWarnings), as `pass` judges them. */
  checkProxy(request: Req): void {
    this.#proxyWarnings.check(request)
  }

  /** The key of `request`: `key`'s answer, or the client IP `ip` (asked when not given), IPv6 masked. */
  key(request: Req, ip?: string): Awaitable<string> {
    const { key } = this.#config
    return key ? key(request) : this.#ipKeys.of(ip ?? this.#binding.clientIp(request) ?? '')
  }

  /**
   * The key of a request to decide: as `key`, or GONE when the default key finds no address because the client has
   * left (the address goes with the connection, e.g. while an earlier middleware was still working): such a
   * request is not decided, and nothing is logged for it. An address missing for any other reason is still
   * `ERR_RATEWINDOW_INVALID_IP`: the framework is set up wrong.
   */
  decisionKey(request: Req): Awaitable<string | typeof GONE> {
    if (this.#config.key) return this.#config.key(request)
    const ip = this.#binding.clientIp(request)
    if (!ip && this.#binding.gone?.(request) === true) return GONE
    return this.#ipKeys.of(ip ?? '')
  }

  /** The access lists by key: a denial, undefined for a request that passes unlimited, or go on. */
  passKey(key: string, passage: typeof GO_ON | typeof ALLOWED_IP): HttpDecision | undefined | typeof GO_ON {
    const { allowList, denyList } = this.#config
    if (denyList?.hasKey(key)) return this.#denied(key)
    if (passage === ALLOWED_IP || allowList?.hasKey(key)) return undefined
    return GO_ON
  }

  #unlessSkipped(request: Req): Awaitable<Passage> {
    const { skip } = this.#config
    if (skip === undefined) return this.#byIp(request)
    return step(skip(request), (skipped) =>
      skipped ? this.#skippedUnlessDenied(request) : this.#byIp(request),
    )
  }

  /** A skipped request the deny list names is still refused; else undefined. */
  #skippedUnlessDenied(request: Req): Awaitable<HttpDecision | undefined> {
    const { denyList } = this.#config
    if (denyList === undefined || denyList.empty) return undefined
    const ip = this.#binding.clientIp(request)
    if (denyList.hasIp(ip)) return this.#denied(ip ?? '')
    // The key is computed for a skipped request only when the deny list holds keys.
    if (!denyList.keyed) return undefined
    return step(this.key(request, ip), (key) => (denyList.hasKey(key) ? this.#denied(key) : undefined))
  }

  /** The access lists by the client's IP, for a request not skipped; the first judging of the proxy settings. */
  #byIp(request: Req): Passage {
    this.#proxyWarnings.check(request)
    const { allowList, denyList } = this.#config
    if (allowList === undefined && denyList === undefined) return GO_ON
    const ip = this.#binding.clientIp(request)
    if (denyList?.hasIp(ip)) return this.#denied(ip ?? '')
    return allowList?.hasIp(ip) === true ? ALLOWED_IP : GO_ON
  }

  /** A deny-listed request: refused before any store call, without RateLimit headers. */
  #denied(key: string): HttpDecision {
    return this.#writer.denied(key, this.#first())
  }
}
