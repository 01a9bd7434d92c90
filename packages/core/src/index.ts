export {
  type AlgorithmName,
  fixedWindow,
  type Rule,
  type RuleOutcome,
  slidingWindowCounter,
  slidingWindowLog,
  type TokenBucketOptions,
  tokenBucket,
  type WindowRuleOptions,
} from './algorithms/index.js'
export { BlockedCache, type BlockedCacheOptions } from './blocked-cache.js'
export { type Duration, formatDuration, parseDuration } from './duration.js'
export { RateLimitError, type RateLimitErrorCode } from './errors.js'
export { CircuitBreaker, type CircuitBreakerOptions } from './failure.js'
export {
  HEADER_FORMATS,
  type HeaderFormat,
  type HeaderOptions,
  partitionKey,
  rateLimitHeaders,
  toSeconds,
} from './headers.js'
export {
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  type HttpRateLimitOptions,
  type ResponseBody,
  type TrackedResponse,
} from './http.js'
export { DEFAULT_IPV6_SUBNET, type IpKeyOptions, ipKey } from './keys.js'
export { type FailureContext, type LimitOptions, RateLimiter, type RateLimiterOptions } from './limiter.js'
export type { DecisionSource, RateLimitResult, RuleResult } from './result.js'
export {
  glideRunner,
  ioredisRunner,
  nodeRedisRunner,
  type RedisClient,
  type RedisScriptRunner,
} from './stores/clients/index.js'
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js'
export { RedisStore, type RedisStoreOptions } from './stores/redis.js'
export { SyncedStore, type SyncedStoreOptions } from './stores/synced.js'
export type { Awaitable, Decision, RefundRequest, Store, StoreRequest, StoreTarget } from './stores/types.js'
export type { SyncedRedisClient } from './sync/script.js'
