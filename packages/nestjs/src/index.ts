export type { RateLimitObserver, RateLimitResult, Store } from '@ratewindow/core'
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
export type { NestHttpRequest, NestHttpResponse, NestPlatform } from './binding.js'
export { RateLimit, SkipRateLimit } from './decorators.js'
export { GraphQLRateLimitError } from './graphql-context.js'
export { RateLimitException, RateWindowGuard, RateWindowMiddleware } from './guard.js'
export { RateLimitInfo, RateWindowModule, type RateWindowModuleAsyncOptions } from './module.js'
export type { RateWindowModuleOptions, RateWindowOptions, RouteRateWindowOptions } from './options.js'
export { type AppliedLimiter, RATEWINDOW_OPTIONS, RateWindowService, type ResetScope } from './service.js'
export { type NestSlowDownOptions, type SlowDownMiddleware, slowDown } from './slow-down.js'
