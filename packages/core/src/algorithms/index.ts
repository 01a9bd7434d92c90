import { FIXED_WINDOW } from './fixed-window.js'
import { GCRA } from './gcra.js'
import { QUOTA } from './quota.js'
import { SLIDING_WINDOW_COUNTER } from './sliding-window-counter.js'
import { SLIDING_WINDOW_LOG } from './sliding-window-log.js'
import { TOKEN_BUCKET } from './token-bucket.js'
import type { AlgorithmDefinition, AlgorithmName, WindowAlgorithmDefinition } from './types.js'

export { fixedWindow } from './fixed-window.js'
export { type GcraOptions, gcra } from './gcra.js'
export { type QuotaOptions, quota } from './quota.js'
export { slidingWindowCounter } from './sliding-window-counter.js'
export { slidingWindowLog } from './sliding-window-log.js'
export { type TokenBucketOptions, tokenBucket } from './token-bucket.js'
export type { AlgorithmName, Rule, RuleOutcome, WindowRuleOptions } from './types.js'

/** The algorithms the middleware option `algorithm` names: every one but the quota. */
export type WindowAlgorithmName = Exclude<AlgorithmName, 'quota'>

/**
 * @internal The algorithm registry: name → rule factory for the middleware `algorithm` option, Lua twin and
 * code. A new algorithm is one file exporting its `AlgorithmDefinition` and one line here (or, without a window
 * the middleware could give it, in `ALGORITHMS_BY_CODE`, as the quota).
 */
export const ALGORITHMS: Readonly<Record<WindowAlgorithmName, WindowAlgorithmDefinition>> = Object.freeze({
  [FIXED_WINDOW.name]: FIXED_WINDOW,
  [SLIDING_WINDOW_LOG.name]: SLIDING_WINDOW_LOG,
  [SLIDING_WINDOW_COUNTER.name]: SLIDING_WINDOW_COUNTER,
  [TOKEN_BUCKET.name]: TOKEN_BUCKET,
  [GCRA.name]: GCRA,
} as Record<WindowAlgorithmName, WindowAlgorithmDefinition>)

/** @internal The registry by Lua code, for the Redis script. */
export const ALGORITHMS_BY_CODE: ReadonlyMap<number, AlgorithmDefinition> = new Map(
  [...Object.values(ALGORITHMS), QUOTA].map((definition): [number, AlgorithmDefinition] => [
    definition.code,
    definition,
  ]),
)
