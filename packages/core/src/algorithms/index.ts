import { FIXED_WINDOW_CODE, FIXED_WINDOW_LUA } from './fixed-window.js'
import { SLIDING_WINDOW_COUNTER_CODE, SLIDING_WINDOW_COUNTER_LUA } from './sliding-window-counter.js'
import { SLIDING_WINDOW_LOG_CODE, SLIDING_WINDOW_LOG_LUA } from './sliding-window-log.js'
import { TOKEN_BUCKET_CODE, TOKEN_BUCKET_LUA } from './token-bucket.js'

export { fixedWindow } from './fixed-window.js'
export { slidingWindowCounter } from './sliding-window-counter.js'
export { slidingWindowLog } from './sliding-window-log.js'
export { type TokenBucketOptions, tokenBucket } from './token-bucket.js'
export type { AlgorithmName, Rule, RuleOutcome, WindowRuleOptions } from './types.js'

/** @internal Each algorithm's Lua twin by code; each registers itself in the script's table `A`. */
export const ALGORITHM_LUA: Readonly<Record<number, string>> = {
  [FIXED_WINDOW_CODE]: FIXED_WINDOW_LUA,
  [SLIDING_WINDOW_LOG_CODE]: SLIDING_WINDOW_LOG_LUA,
  [SLIDING_WINDOW_COUNTER_CODE]: SLIDING_WINDOW_COUNTER_LUA,
  [TOKEN_BUCKET_CODE]: TOKEN_BUCKET_LUA,
}
