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
export type { H3AddressOptions } from './binding.js'
export type { H3EventLike } from './event.js'
export {
  type H3RateLimitOptions,
  type RateLimitContext,
  type RateLimitMiddleware,
  rateLimit,
} from './rate-limit.js'
export {
  type H3SlowDownOptions,
  type SlowDownContext,
  type SlowDownMiddleware,
  slowDown,
} from './slow-down.js'

import type { RateLimitContext } from './rate-limit.js'
import type { SlowDownContext } from './slow-down.js'

// `event.context.rateLimit` and `event.context.slowDown` typed in every h3 app (1 and 2) that imports this package.
declare module 'h3' {
  interface H3EventContext extends RateLimitContext, SlowDownContext {}
}
