export type { RateLimitObserver, RateLimitResult, SettleResult, Store } from '@ratewindow/core'
export {
  AccessList,
  combineObservers,
  fixedWindow,
  gcra,
  ipKey,
  MemoryStore,
  quota,
  RateLimitError,
  RedisStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
export { countResultFields } from './actual.js'
export { isRefusal, refusalError } from './errors.js'
export {
  COST_MODEL_DEFAULTS,
  type CostEstimate,
  type CostedOperation,
  type CostModelOptions,
  DepthExceeded,
  estimateCost,
  type IntrospectionBound,
  IntrospectionExceeded,
} from './estimate.js'
export { type Admission, type AdmittedOperation, GraphQLRateLimiter, type Refusal } from './limiter.js'
export type {
  ExecutionOutcome,
  GraphQLOperation,
  GraphQLRateLimitOptions,
  HeaderReader,
  OperationConcurrency,
} from './options.js'
