export { AccessList, type AccessListEntries, type AccessListOption } from './access-list.js'
export {
  type AlgorithmName,
  fixedWindow,
  type GcraOptions,
  gcra,
  type Rule,
  type RuleOutcome,
  slidingWindowCounter,
  slidingWindowLog,
  type TokenBucketOptions,
  tokenBucket,
  type WindowRuleOptions,
} from './algorithms/index.js'
export type { BlockedCacheOptions } from './blocked-cache.js'
export type { CircuitBreakerOptions } from './circuit-breaker.js'
export {
  ConcurrencyLimiter,
  type ConcurrencyLimiterOptions,
  type ConcurrencyResult,
} from './concurrency.js'
export type { DelayTimers } from './delay-queue.js'
export type { Duration, DurationUnit } from './duration.js'
export { invalid, RateLimitError, type RateLimitErrorCode, requireObject } from './errors.js'
export {
  type HeaderFormat,
  type HeaderOptions,
  headerReset,
  partitionKey,
  rateLimitHeaders,
} from './headers.js'
export {
  type ClosableSocket,
  type Defer,
  type EngineScope,
  type FrameworkBinding,
  type HttpDecision,
  HttpRateLimiter,
  socketClosed,
  type TrackedResponse,
} from './http.js'
export {
  type ConcurrencyOptions,
  DELAY_DEFAULTS,
  type DelayOptions,
  HTTP_DEFAULTS,
  type HttpRateLimitOptions,
  type ResponseBody,
} from './http-options.js'
export { DEFAULT_IPV6_SUBNET, type IpKeyOptions, ipKey } from './keys.js'
export { type LimitOptions, RateLimiter, WaitExceededError, type WaitOptions } from './limiter.js'
export {
  type BreakerEvent,
  type BreakerState,
  combineObservers,
  DECISION_OUTCOMES,
  type DecisionEvent,
  type DecisionOutcome,
  type RateLimitObserver,
  type StoreCallEvent,
  type StoreErrorKind,
} from './observe.js'
export { namesOf, type PeerOptionName, rejectUnknownOptions } from './option-names.js'
export { type FailureContext, LIMITER_DEFAULTS, type RateLimiterOptions } from './options.js'
export type { PenaltyOptions } from './penalty.js'
export type { DecisionSource, RateLimitResult, RuleResult, SettleResult } from './result.js'
export {
  SLOW_DOWN_DEFAULTS,
  type SlowDownDecision,
  SlowDownEngine,
  type SlowDownInfo,
  type SlowDownOptions,
} from './slow-down.js'
export {
  glideRunner,
  ioredisRunner,
  nodeRedisRunner,
  type RedisClient,
  type RedisScriptRunner,
  scriptRunnerFor,
} from './stores/clients/index.js'
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js'
export { RedisStore, type RedisStoreOptions } from './stores/redis.js'
export {
  acquireLease,
  applyToKeyState,
  type EncodedRule,
  type EncodedStoreRequest,
  encodeStoreRequest,
  type KeyState,
  type KeyStateResult,
  keyStateId,
  type LeaseState,
  releaseLease,
} from './stores/remote.js'
export { type SyncedRedisClient, SyncedStore, type SyncedStoreOptions } from './stores/synced.js'
export type {
  Awaitable,
  CallBound,
  CallReport,
  ConcurrencyStore,
  Decision,
  LeaseDecision,
  LeaseRequest,
  RefundRequest,
  Store,
  StoreRequest,
  StoreTarget,
} from './stores/types.js'
export type { WaitSignal } from './wait-queue.js'
