export type { AnchorInput, CalendarUnit } from './algorithms/calendar.js'
export {
  type AlgorithmName,
  fixedWindow,
  type GcraOptions,
  gcra,
  type QuotaOptions,
  quota,
  type Rule,
  type RuleOutcome,
  slidingWindowCounter,
  slidingWindowLog,
  type TokenBucketOptions,
  tokenBucket,
  type WindowAlgorithmName,
  type WindowRuleOptions,
} from './algorithms/index.js'
export type {
  LimitOverride,
  ManualBlock,
  OverrideChange,
  OverrideRecord,
  RuleLimit,
} from './algorithms/override.js'
export type { PenaltyOptions } from './algorithms/penalty.js'
export type { PlanRules, RecordedPlans } from './algorithms/plans.js'
export type { CircuitBreakerOptions } from './gateway/circuit-breaker.js'
export { AccessList, type AccessListEntries, type AccessListOption } from './http/access-list.js'
export type { TrustProxy } from './http/forwarded-for.js'
export { type HeaderFormat, type HeaderOptions, rateLimitHeaders } from './http/headers.js'
export { DEFAULT_IPV6_SUBNET, type IpKeyOptions, ipKey } from './http/keys.js'
export {
  type ConcurrencyOptions,
  DELAY_DEFAULTS,
  type DelayOptions,
  HTTP_DEFAULTS,
  type HttpRateLimitOptions,
  type ResponseBody,
} from './http/options.js'
export type { RequestWasSuccessful } from './http/success-check.js'
export type { BlockedCacheOptions } from './limiter/blocked-cache.js'
export {
  ConcurrencyLimiter,
  type ConcurrencyLimiterOptions,
  type ConcurrencyResult,
} from './limiter/concurrency.js'
export { type LimitOptions, RateLimiter } from './limiter/limiter.js'
export { LIMITER_DEFAULTS, type RateLimiterOptions } from './limiter/options.js'
export { WaitExceededError, type WaitOptions } from './limiter/wait.js'
export {
  type BreakerEvent,
  type BreakerState,
  combineObservers,
  DECISION_OUTCOMES,
  type DecisionEvent,
  type DecisionOutcome,
  type FailureContext,
  type NearLimit,
  type OverrideAction,
  type OverrideEvent,
  type RateLimitObserver,
  type StoreCallEvent,
  type StoreErrorKind,
} from './observe.js'
export type { InspectedRule, Inspection, RuleUsage, Usage } from './operator/inspection.js'
export {
  type BlockOptions,
  LimiterOperator,
  LimiterOverrides,
  type OperatorOptions,
  type OverrideList,
  type OverrideListOptions,
  type OverrideSetOptions,
} from './operator/operator.js'
export type { TopKey, TopKeys, TopOptions } from './operator/top.js'
export type { DecisionSource, RateLimitResult, RuleResult, SettleResult } from './result.js'
export type { SlowDownInfo } from './slow-down/decision.js'
export { SLOW_DOWN_DEFAULTS, type SlowDownOptions } from './slow-down/options.js'
export { MemoryStore } from './stores/local/memory.js'
export type { MemoryStoreOptions } from './stores/local/memory-options.js'
export {
  glideRunner,
  ioredisRunner,
  nodeRedisRunner,
  type RedisClient,
  type RedisScriptRunner,
  scriptRunnerFor,
} from './stores/redis/clients/index.js'
export type { RedisStoreOptions } from './stores/redis/options.js'
export { RedisStore } from './stores/redis/redis.js'
export { type SyncedRedisClient, SyncedStore, type SyncedStoreOptions } from './stores/synced/synced.js'
export type {
  Awaitable,
  CallBound,
  CallReport,
  Charged,
  ConcurrencyStore,
  Decision,
  LeaseDecision,
  LeaseRequest,
  OverridePage,
  RefundRequest,
  Store,
  StoredKeyPage,
  StoreRequest,
  StoreTarget,
} from './stores/types.js'
export type { Duration, DurationUnit } from './support/duration.js'
export { RateLimitError, type RateLimitErrorCode } from './support/errors.js'
export type { DelayTimers } from './time/timers.js'
export type { WaitSignal } from './time/wait-queue.js'
