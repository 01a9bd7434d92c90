/**
 * Rules read back from their storage ids (`Rule.id`), for tools that find a limiter's state in a store without the
 * code that made it (`decodeNamespace`, `@ratewindow/cli`): the inverse of the ids the factories write
 * (`windowRule`, `tokenBucket`, `gcra`).
 */
import { fixedWindow } from './fixed-window.js'
import { gcra } from './gcra.js'
import { slidingWindowCounter } from './sliding-window-counter.js'
import { slidingWindowLog } from './sliding-window-log.js'
import { tokenBucket } from './token-bucket.js'
import type { Rule, WindowRuleOptions } from './types.js'

/** The window algorithms by the initials their ids start with: `fw60000` is a fixed window of 60 s. */
const WINDOW_RULES: Readonly<Record<string, (options: WindowRuleOptions) => Rule>> = {
  fw: fixedWindow,
  swl: slidingWindowLog,
  swc: slidingWindowCounter,
}

/**
 * The rule stored under `id`, made by its factory (default policy name), or undefined when the id is not one a
 * factory writes. A window rule's id holds no limit: it needs `limit` (a namespace's signature holds it);
 * the token bucket's and GCRA's ids hold every parameter.
 */
export function ruleFromId(id: string, limit: number | undefined): Rule | undefined {
  try {
    const window = /^(fw|swl|swc)(\d+)$/.exec(id)
    if (window !== null) {
      return limit === undefined ? undefined : WINDOW_RULES[window[1]!]!({ limit, window: Number(window[2]) })
    }
    const bucket = /^(tb|gc)(\d+)-(\d+)-(\d+)$/.exec(id)
    if (bucket === null) return undefined
    const [a, b, c] = [Number(bucket[2]), Number(bucket[3]), Number(bucket[4])]
    return bucket[1] === 'tb'
      ? tokenBucket({ capacity: a, refillRate: b, interval: c })
      : gcra({ limit: a, window: b, burst: c })
  } catch {
    // Parameters no factory accepts: not an id a limiter wrote.
    return undefined
  }
}
