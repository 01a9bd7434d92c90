/**
 * `@ratewindow/core/adapter`: the kit for packages that bind the HTTP engine to a framework (the adapters of
 * this repository, or your own). An application does not need it: it uses an adapter package and the names of
 * `@ratewindow/core`. See docs/package-authors.md.
 */

export {
  type AddressOptions,
  type AddressSource,
  addressOptions,
} from '../http/address-options.js'
export {
  type ClosableSocket,
  connectionStalled,
  type Defer,
  type EnginePlacement,
  type EngineScope,
  type FrameworkBinding,
  type ReceivedMessage,
  socketClosed,
  type TrackedResponse,
  trustsEveryHop,
} from '../http/binding.js'
export { type HttpDecision, NO_SLOT_RETRY_AFTER_MS } from '../http/decision.js'
export { HttpRateLimiter } from '../http/engine.js'
export { type AbortSignalLike, FetchResponse } from '../http/fetch-response.js'
export {
  forwardedClient,
  type TrustedHop,
  trustedProxies,
  trustsEveryAddress,
  withoutPort,
} from '../http/forwarded-for.js'
export { type MiddlewareHandles, type ResetScope, withHandles } from '../http/handles.js'
export { headerReset, partitionKey } from '../http/headers.js'
export { INVALID_ADDRESS, unlessInvalidAddress } from '../http/invalid-address.js'
export { rateLimiterOptionsFrom } from '../http/limiter-options.js'
export { middlewareOptionNames } from '../http/options.js'
export {
  followedBody,
  type StreamLike,
  watchedBody,
  watchedIterable,
} from '../http/sent-body.js'
export { type FieldWriter, showFields } from '../http/shown-fields.js'
export { type SettledConcurrency, settledConcurrency } from '../http/slots.js'
export type { SlowDownDecision, SlowDownRefusal } from '../slow-down/decision.js'
export { SlowDownEngine } from '../slow-down/engine.js'
