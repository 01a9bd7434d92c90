/**
 * The trust-proxy warnings: once about a framework that trusts every proxy hop, once about a request that
 * carried X-Forwarded-For to a framework that trusts none. Either makes the client IP, and so the key, wrong.
 */
import { emitWarning } from '../support/runtime.js'
import type { FrameworkBinding } from './binding.js'

/** Frameworks already warned about a permissive trust-proxy setting: once per process each. */
const warnedPermissive = new WeakSet<object>()

/** One middleware's judge of its framework's proxy settings. */
export class ProxyWarnings<Req> {
  readonly #binding: FrameworkBinding<Req>
  /** Whether the proxy settings were judged: on the first request, and on the first with X-Forwarded-For. */
  #checkedPermissive = false
  #checkedForwardedFor = false

  constructor(binding: FrameworkBinding<Req>) {
    this.#binding = binding
  }

  /**
   * Warns once about a trust-proxy setting that makes keys wrong. The settings do not change while the app
   * runs, so this costs nothing after the first request with X-Forwarded-For.
   */
  check(request: Req): void {
    const binding = this.#binding
    if (!this.#checkedPermissive) {
      this.#checkedPermissive = true
      if (!warnedPermissive.has(binding) && binding.permissiveTrustProxy?.(request)) {
        warnedPermissive.add(binding)
        emitWarning(
          `${binding.name} trusts every proxy hop, so any client can choose its rate limit key by sending ` +
            `X-Forwarded-For. ${binding.permissiveTrustProxyHint ?? 'Trust only your own proxies.'}`,
          'RATEWINDOW_PERMISSIVE_TRUST_PROXY',
        )
      }
    }
    if (this.#checkedForwardedFor) return
    const untrusted = binding.untrustedForwardedFor(request)
    if (untrusted === undefined) return
    this.#checkedForwardedFor = true
    if (!untrusted) return
    emitWarning(
      `A request carried X-Forwarded-For but ${binding.name} does not trust proxies, so every client behind ` +
        `your proxy shares the proxy's rate limit. If a proxy you control sets it, ${binding.trustProxyHint}.`,
      'RATEWINDOW_UNTRUSTED_PROXY',
    )
  }
}
