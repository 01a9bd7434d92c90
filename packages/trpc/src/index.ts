export type { RateLimitObserver, RateLimitResult, SettleResult, Store, TrustProxy } from '@ratewindow/core'
export {
  AccessList,
  combineObservers,
  fixedWindow,
  gcra,
  MemoryStore,
  quota,
  RateLimitError,
  RedisStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export { RateLimitExceeded, rateLimitErrorFormatter, retryAfterOf } from './errors.js'
export {
  type AdmittedCall,
  type RateLimitArguments,
  type RateLimitContext,
  type RateLimitMiddleware,
  rateLimit,
} from './middleware.js'
export type { CallConcurrency, KeySource, TrpcCall, TrpcRateLimitOptions } from './options.js'
