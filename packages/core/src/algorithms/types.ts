import type { Duration } from '../support/duration.js'
import type { CalendarPeriods } from './calendar.js'

/** The algorithms ratewindow ships. */
export type AlgorithmName =
  | 'fixed-window'
  | 'sliding-window-log'
  | 'sliding-window-counter'
  | 'token-bucket'
  | 'gcra'
  | 'quota'

/**
 * One entry of the algorithm registry (`algorithms/index.ts`): everything the library needs to know about an
 * algorithm, defined in the algorithm's own file.
 * @internal
 */
export interface AlgorithmDefinition {
  readonly name: AlgorithmName
  /** The number the Lua script dispatches on. */
  readonly code: number
  /** The Lua twin of the algorithm's `AlgorithmLogic`, written inline into the decision script per rule. */
  readonly lua: LuaTwin
}

/**
 * An algorithm the middleware option `algorithm` names (every one but the quota, whose periods are not a window).
 * @internal
 */
export interface WindowAlgorithmDefinition extends AlgorithmDefinition {
  /** The rule behind the middleware option `algorithm: name` with `limit` and `window`. */
  readonly fromLimit: (limit: number, window: Duration) => Rule
}

/**
 * The names a Lua twin writes its code with, for rule i of a decision script (stores/redis/script.ts).
 * @internal
 */
export interface LuaRule {
  /** The rule's key: `KEYS[i]`. */
  readonly key: string
  /** The rule's numeric parameters (`Rule.script.params`), already numbers. */
  readonly params: readonly string[]
  /** The variable of this rule named `name` (one of the twin's `state`): a local, or a slot of a table. */
  v(name: string): string
}

/**
 * The Lua twin of an algorithm: snippets of Lua that the script generator writes inline for each rule, so that
 * a decision runs no closures and builds no tables of its own. Snippets may use the script's
 * `now` (ms), `mode`, `server` (true when `now` is the server's TIME) and the helper `num(n)` (a whole number as a
 * string; Lua's default keeps 14 digits only), and must keep their own temporaries inside `do … end`.
 * @internal
 */
export interface LuaTwin {
  /** How many of `Rule.script.params` the script receives (ARGV) for a rule of this algorithm. */
  readonly params: number
  /** The rule's state variables, declared by the script. */
  readonly state: readonly string[]
  /**
   * Statements: `create` + reading the key + `advance`. Sets `v('broken')` to true when the key holds another
   * type or content it cannot read (the script then deletes it and decides from the fresh state), and
   * `v('convert')` to true when it read an older format that the next write must replace even on a read.
   */
  load(r: LuaRule): string
  /** An expression: whether `cost` fits. */
  fits(r: LuaRule, cost: string): string
  /**
   * Statements recording `cost` at now (`AlgorithmLogic.consume`), past the limit too: a charge (`Store.charge`)
   * may leave the rule owing units.
   */
  consume(r: LuaRule, cost: string): string
  refund(r: LuaRule, cost: string, at: string): string
  /**
   * Reservation (`AlgorithmLogic.wait`): statements raising the script's `w` to this rule's wait (ms) for `cost`.
   * Absent for algorithms that cannot reserve.
   */
  wait?(r: LuaRule, cost: string): string
  /** Reservation (`AlgorithmLogic.reserve`): statements charging `cost` at `at` (ms, >= now). */
  reserve?(r: LuaRule, cost: string, at: string): string
  /**
   * `AlgorithmLogic.give`: statements giving back up to `cost` units now, without the time they were admitted.
   * Absent where `refund` at now does it (every algorithm but the log).
   */
  give?(r: LuaRule, cost: string): string
  /** Statements assigning the script's `remaining`, `reset` and `retry` (see `AlgorithmLogic.report`). */
  report(r: LuaRule, pending: string, denied: string): string
  /** An expression: the units the rule counts now (`AlgorithmLogic.used`), after `load`. */
  used(r: LuaRule): string
  /** An expression: the rule's limit in units (`Rule.limit` of the rule in force), after `load`. */
  limit(r: LuaRule): string
  /**
   * An expression, after `load`: the most units past its limit a charge may leave the rule owing
   * (`AlgorithmLogic.carriedDebt`). Absent where the state carries any debt.
   */
  carriedDebt?(r: LuaRule): string
  /**
   * Statements saving the state with its TTL, or deleting the key when the state equals a fresh one.
   * `keepTtl`: true after a consume, where the twin may keep the TTL the key has when its state shows that the
   * key's expiry has not moved; false where the TTL must be written (refunds, and the repair of a key without one).
   */
  persist(r: LuaRule, keepTtl: boolean): string
}

/**
 * Every rule's figures of one decision, by rule index (`RuleOutcome`'s, in columns): what `AlgorithmLogic.report`
 * writes, reused by its owner from one decision to the next so that a local decision allocates nothing. More
 * per-rule columns (a limit in force, a cost per rule) go beside these.
 */
export interface OutcomeRecord {
  remaining: number[]
  reset: number[]
  retryAfter: number[]
}

/** What one rule reports for one decision, in whole milliseconds. */
export interface RuleOutcome {
  /** How many cost-1 requests this rule would still admit now. */
  remaining: number
  /**
   * A peek's only (`Store.peek`, `peekStored`): the units this rule counts now, which may exceed its limit (a limit
   * lowered by an override, or a settle's debt: `Store.charge`). A store that leaves it out gets `limit − remaining`
   * reported instead.
   */
  used?: number
  /** Wait until this rule's whole quota is free again, if nothing else arrived (0 when it already is). */
  reset: number
  /**
   * On a denial: the smallest wait after which the same request passes this rule (0 when it passes now). On an
   * admitted request: the wait until a cost-1 request passes this rule (0 while one still would), which the
   * reset headers announce at remaining 0. A store that leaves it 0 there gets `reset` announced instead.
   */
  retryAfter: number
}

/**
 * The pure decision of one algorithm over its per-key state `S`. Written once here in TypeScript and once in
 * Lua (the `lua` of its `AlgorithmDefinition`); the conformance suite demands that both give identical results.
 *
 * A decision runs in two phases so that several rules are all-or-nothing: every rule is `advance`d to `now`
 * and asked whether the request `fits`; only when all fit is each one `consume`d.
 * @internal
 */
export interface AlgorithmLogic<S> {
  /** A fresh state: the key has never been seen, or has expired. */
  create(): S
  /** Brings the state to `now` (rolls windows, prunes the log, refills tokens). Meaning-preserving. */
  advance(state: S, now: number): void
  /** Whether a request of `cost` passes now. */
  fits(state: S, now: number, cost: number): boolean
  /**
   * Records an admitted request of `cost` at `now`; also a charge (`Store.charge`), which may take the state past
   * the limit: the rule then owes the units above it until they have passed at its rate (the fixed window carries
   * them into the next windows, the sliding windows keep them in their counts, the token bucket goes below zero,
   * GCRA moves its TAT past the tolerance). Nothing is admitted while a rule owes units.
   */
  consume(state: S, now: number, cost: number): void
  /**
   * The most units past its limit a charge may leave the rule owing, whatever `maxDebt` allows: what its state
   * carries. Absent where it carries any debt until it has passed at the rule's rate (the fixed window, the token
   * bucket, GCRA). The sliding windows count a unit for one window however many there are: a debt above one limit
   * would be forgotten with the window, so they carry one limit (`limit`), and a charge beyond it is uncharged.
   */
  readonly carriedDebt?: number
  /**
   * Reservation (`delay`, `RateLimiter.wait`): the wait (ms, whole) from `now` until a request of `cost` may go
   * when nothing else arrives, the state advanced to `now`; 0 when it may go now. Only algorithms that know the
   * next admission beyond the current window have it (GCRA, token bucket, sliding window log); the fixed window
   * and the sliding window counter do not: their next window admits a burst of `limit` at once, so a reserved
   * slot there is either a burst at the boundary or a guess.
   */
  wait?(state: S, now: number, cost: number): number
  /**
   * Reservation: charges `cost` at `at` (ms, at least `now` + `wait`), the state advanced to `now`, so that the
   * requests admitted or reserved after it never take that slot. `refund` with the same `at` gives it back where
   * the state can show the gap (see `refund`).
   */
  reserve?(state: S, now: number, at: number, cost: number): void
  /**
   * Gives back `cost` admitted at `at` (for skipped requests), where the state still holds it. While slots are
   * reserved ahead, never a slot a later reservation still holds: the sliding window log removes the
   * exact entries; GCRA and the token bucket, one number per key, move it back only for the last slot reserved
   * and leave an earlier one empty.
   */
  refund(state: S, now: number, cost: number, at: number): void
  /**
   * Reservation: true where `refund` gives back only the last slot reserved (GCRA, token bucket). A process then
   * gives its own waiters' slots back latest first (limiter/reserved-slots.ts), so that waiters leaving earliest
   * first still give every slot back.
   */
  readonly lastSlotOnly?: boolean
  /**
   * The outcome after the decision, written into `into` at the rule's index `i` (a caller-owned record: nothing
   * allocated). `pending` is a cost admitted but not written (a peek), `deniedCost` the cost of a denied request,
   * or 1 when the request was allowed: `retryAfter` is then the wait until a cost-1 request passes.
   */
  report(state: S, now: number, pending: number, deniedCost: number, into: OutcomeRecord, i: number): void
  /** How long the state matters; 0 when it equals a fresh state and may be dropped. */
  ttl(state: S, now: number): number
  /**
   * The units the rule counts now, the state advanced to `now`: `limit − remaining` while that is not below 0,
   * and more than `limit` when it owes units (a limit lowered by an override, or a settle's debt).
   */
  used(state: S, now: number): number
  /**
   * An override changed the rule's rate (algorithms/override.ts): converts `state`, kept under the parameters
   * `from` (the `Rule.script.params` it was written with), to this rule's, keeping the units used and rounding
   * up, so that a change never admits more than this rule allows (a lowered limit may leave more used than it
   * holds: nothing is admitted until that has rested). Absent where the state counts units whatever the limit
   * (the window algorithms).
   */
  adopt?(state: S, from: readonly number[], now: number): void
  /**
   * Gives back up to `cost` units now, without the time they were admitted (`RateLimiter.give`), the state
   * advanced to `now`. Absent where `refund` at `now` does it (every algorithm but the log, whose refund removes
   * the entries of one time).
   */
  give?(state: S, now: number, cost: number): void
}

/**
 * One rate limit rule: an algorithm with its parameters. Create rules with `fixedWindow`,
 * `slidingWindowLog`, `slidingWindowCounter`, `tokenBucket` or `gcra`; the limiter never switches on names.
 */
export interface Rule {
  readonly algorithm: AlgorithmName
  /** Requests (cost units) admitted per window; the bucket capacity for the token bucket. */
  readonly limit: number
  /** The window in ms; for the token bucket, the time to refill an empty bucket. */
  readonly windowMs: number
  /** Policy name reported in draft-8 headers. */
  readonly name: string
  /** Storage suffix: algorithm and window, so a changed limit keeps its count. */
  readonly id: string
  /**
   * The largest cost one request may have under this rule: the limit, or less where a cost's work grows with
   * its size (the sliding window log stores one entry per unit).
   */
  readonly maxCost: number
  /**
   * Shadow mode: the rule is counted and decides as usual, but a request only this kind of rule would limit
   * passes (reported as `result.shadow`, outcome `'shadow-limited'`). Set with the factory's `shadow` option.
   */
  readonly shadow: boolean
  /**
   * A soft limit: the share of the limit used at which a decision says the key is near it (`DecisionEvent.nearLimit`,
   * once per key and window or period; the middleware's `warnHeader`), before the hard limit refuses. Set with the
   * factory's `warnAt` option; absent: the limiter's `nearLimit` share applies.
   */
  readonly warnAt?: number
  /** @internal */
  readonly logic: AlgorithmLogic<unknown>
  /** @internal Lua algorithm code and its three numeric parameters. */
  readonly script: { readonly code: number; readonly params: readonly [number, number, number] }
  /**
   * @internal A quota's calendar periods (algorithms/quota.ts): a store that decides in Lua receives the bounds of
   * the period at the deciding process's time (`quotaBounds`) in place of the parameters past the limit.
   */
  readonly periods?: CalendarPeriods
}

/** Options shared by the window-based rule factories. */
export interface WindowRuleOptions {
  /** Requests admitted per window: a positive whole number. */
  limit: number
  /** The window: milliseconds or `'500ms' | '30s' | '1m' | '1h' | '1d'`. */
  window: Duration
  /** Policy name for draft-8 headers. @default `'<limit>-per-<window>'` */
  name?: string
  /** Count and report, but never refuse (docs/rollout.md); `false` enforces. @default false */
  shadow?: boolean
  /**
   * A soft limit: the share of the limit (above 0, below 1) at which the key is said to be near it, once per key and
   * window (`DecisionEvent.nearLimit`; the middleware's `warnHeader`). @default the limiter's `nearLimit`
   */
  warnAt?: number
}
