export type { RateLimitObserver, RateLimitResult, Store } from '@ratewindow/core'
export {
  AccessList,
  fixedWindow,
  gcra,
  MemoryStore,
  quota,
  RateLimitError,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export type { ActionDecision, ActionRateLimiter, ActionRateLimitOptions, ActionRequest } from './action.js'
export { rateLimitAction } from './action.js'
export type { HeadersCarrier, NextAddressOptions } from './address.js'
export type { NextRateLimitOptions, NextRequestLike } from './binding.js'
export { RedisStore } from './edge.js'
export type { NextMiddlewareOptions, RateLimitMiddleware } from './middleware.js'
export { rateLimit } from './middleware.js'
export type { RateLimitedHandler } from './route.js'
export { rateLimitOf, withRateLimit } from './route.js'
