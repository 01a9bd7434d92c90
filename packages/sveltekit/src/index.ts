export type { RateLimitObserver, RateLimitResult, SlowDownInfo, Store } from '@ratewindow/core'
export {
  AccessList,
  ConcurrencyLimiter,
  combineObservers,
  fixedWindow,
  gcra,
  MemoryStore,
  quota,
  RateLimitError,
  RedisStore,
  SyncedStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export type { KitAddressOptions } from './address.js'
export {
  type ActionDecision,
  type ActionRateLimiter,
  type ActionRateLimitOptions,
  type RateLimitedHandler,
  rateLimitAction,
  withRateLimit,
} from './endpoint.js'
export {
  type KitRateLimitOptions,
  type RateLimitHandle,
  type RateLimitLocals,
  rateLimit,
} from './handle.js'
export {
  type KitSlowDownOptions,
  type SlowDownHandle,
  type SlowDownLocals,
  slowDown,
} from './slow-down.js'
