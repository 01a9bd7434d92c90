/**
 * @ratewindow/testing: what tests of an app that uses ratewindow need (docs/testing.md), and the conformance
 * suite that a store written by a third party runs to prove it decides as ratewindow's own stores do.
 */
export { TestClock } from './clock.js'
export {
  describeDebtConformance,
  describeOverridesConformance,
  describePlanConformance,
  describeQuotaConformance,
  describeStoreConformance,
  type Expect,
  type StoreUnderTest,
  type TestFunctions,
} from './conformance.js'
export {
  type ExpectedRateLimit,
  expectAllowed,
  expectLimited,
  expectNoRateLimit,
  RateLimitAssertionError,
  type RateLimitHeaders,
  type ResponseLike,
  readRateLimit,
} from './headers.js'
export { testPrefix, wipeRedisPrefix, workerId } from './isolation.js'
