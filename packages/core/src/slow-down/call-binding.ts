/**
 * The counting engine of `slowDown()`: a `HttpRateLimiter` over the engine's calls (a request with its callback
 * arguments), on the adapter's own key and trust-proxy rules, whose one rule counts and never refuses.
 */
import { fixedWindow } from '../algorithms/index.js'
import { MAX_PRODUCT } from '../algorithms/rule.js'
import type { FrameworkBinding } from '../http/binding.js'
import { HttpRateLimiter } from '../http/engine.js'
import { isThenable } from '../support/awaitable.js'
import { describeValue, RateLimitError } from '../support/errors.js'
import type { SlowDownOptions } from './options.js'

/** One request as the counting engine sees it: the framework's request and the callbacks' arguments. */
export interface SlowDownCall<Req, Args> {
  request: Req
  args: Args
}

/**
 * The engine that counts `slowDown()`'s requests in fixed windows of `windowMs`: as many per window as the rule
 * can count exactly, so that it only counts. A store that cannot answer, or sheds, lets the request through.
 * `onError` hears the store's failures (the engine's, with its default log).
 */
export function countingEngine<Req, Args extends unknown[], Res>(
  options: SlowDownOptions<Args, Res>,
  windowMs: number,
  binding: FrameworkBinding<Req>,
  where: string,
  onError: SlowDownOptions<Args, Res>['onError'],
): HttpRateLimiter<SlowDownCall<Req, Args>> {
  const { keyGenerator, skip, observer } = options
  const capacity = Math.min(1_000_000_000, Math.floor(MAX_PRODUCT / windowMs))
  return new HttpRateLimiter<SlowDownCall<Req, Args>>(
    {
      rules: fixedWindow({ limit: capacity, window: windowMs, name: 'slow-down' }),
      key:
        keyGenerator &&
        ((call) => {
          const key = keyGenerator(...call.args)
          return isThenable(key) ? Promise.resolve(key).then(generatedKey) : generatedKey(key)
        }),
      skip: skip && ((call) => skip(...call.args)),
      ipv6Subnet: options.ipv6Subnet,
      store: options.store,
      prefix: options.prefix,
      timeout: options.timeout,
      fallback: options.fallback,
      onError,
      circuitBreaker: options.circuitBreaker,
      name: options.name,
      observer:
        observer === undefined
          ? undefined
          : { onStoreCall: observer.onStoreCall, onBreaker: observer.onBreaker },
      // A store that cannot answer, or sheds, lets the request through without delay.
      onStoreError: 'allow',
      onShed: 'fallback',
      headers: false,
    },
    callBinding(binding),
    // Counts of their own: never the counters of a rateLimit() on the same store and prefix.
    {
      scope: 'slow-down',
      where,
      // slowDown() has no `group`: two of them on one store with one `windowMs` share their counts.
      sharing: `give each ${where} its own \`prefix\` to count apart (${where} on one store with the same \`windowMs\` share their counts).`,
    },
  )
}

const callBindings = new WeakMap<object, FrameworkBinding<never>>()

/**
 * The adapter's binding over the engine's calls: one per binding, so that its trust-proxy warnings come once for
 * every slowDown() of the adapter.
 */
function callBinding<Req, Args>(binding: FrameworkBinding<Req>): FrameworkBinding<SlowDownCall<Req, Args>> {
  const known = callBindings.get(binding)
  if (known !== undefined) return known as FrameworkBinding<SlowDownCall<Req, Args>>
  const made = mapBinding<Req, Args>(binding)
  callBindings.set(binding, made as FrameworkBinding<never>)
  return made
}

function mapBinding<Req, Args>(binding: FrameworkBinding<Req>): FrameworkBinding<SlowDownCall<Req, Args>> {
  const { permissiveTrustProxy, route, gone } = binding
  return {
    name: binding.name,
    clientIp: (call) => binding.clientIp(call.request),
    gone: gone && ((call) => gone(call.request)),
    untrustedForwardedFor: (call) => binding.untrustedForwardedFor(call.request),
    trustProxyHint: binding.trustProxyHint,
    permissiveTrustProxy: permissiveTrustProxy && ((call) => permissiveTrustProxy(call.request)),
    permissiveTrustProxyHint: binding.permissiveTrustProxyHint,
    route: route && ((call) => route(call.request)),
  }
}

/** What `keyGenerator` returned, checked: the error names slowDown()'s option, not rateLimit()'s `key`. */
function generatedKey(key: unknown): string {
  if (typeof key === 'string') return key
  throw new RateLimitError(
    'ERR_RATEWINDOW_INVALID_KEY',
    `\`keyGenerator\` must return a string; received ${describeValue(key)}.`,
    { option: 'keyGenerator' },
  )
}
