/**
 * Waiting for a slot: `RateLimiter.wait` and `schedule` (and the HTTP `delay` option, through `SlotWaits`). A
 * wait reserves its slot in the store in the same atomic step that decides it, then waits for that slot on the
 * limiter's one timer (time/wait-queue.ts); `WaitExceededError` says why a slot could not be reserved in time.
 */
import type { Rule } from '../algorithms/types.js'
import type { RateLimitResult } from '../result.js'
import type { Awaitable, Store } from '../stores/types.js'
import { type Duration, parseTimerDuration } from '../support/duration.js'
import { invalid, RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { oneOf } from '../support/validators.js'
import { WaitQueue, type WaitSignal } from '../time/wait-queue.js'
import { ReservedSlots } from './reserved-slots.js'

/** Options of `RateLimiter.wait` and `RateLimiter.schedule`. */
export interface WaitOptions {
  /**
   * Longest wait for a slot: when the earliest admission time is further away, `wait` rejects at once
   * (`ERR_RATEWINDOW_WAIT_EXCEEDED`) and nothing is reserved. Never past the limiter's `reservationHorizon`.
   * @default '1m'
   */
  maxWait?: Duration
  /** Aborts the wait (an `AbortSignal`): it rejects with the signal's reason and the reserved slot is given back. */
  signal?: WaitSignal
  /** Whole units the call costs. @default 1 */
  cost?: number
  /**
   * When the store fails and no `fallback` answers: `'deny'` rejects with `ERR_RATEWINDOW_STORE` (the call would
   * go to someone else's API unlimited); `'allow'` lets the call go at once. @default the limiter's `onStoreError`
   * when it is set, else `'deny'` (docs/waiting.md)
   */
  onStoreError?: 'allow' | 'deny'
  /**
   * With `plans`: the call's plan, as `limit`'s (docs/plans-and-quotas.md). @default the limiter's `defaultPlan`,
   * else its first plan
   */
  plan?: string
}

/** `WaitOptions`' defaults, in one place (the `@default` tags above say the same). */
export const WAIT_DEFAULTS = { maxWait: '1m', cost: 1 } as const satisfies WaitOptions

const WAIT_OPTIONS = namesOf<WaitOptions>({
  maxWait: true,
  signal: true,
  cost: true,
  onStoreError: true,
  plan: true,
})

/**
 * `wait()` could not reserve a slot within `maxWait` (`ERR_RATEWINDOW_WAIT_EXCEEDED`): nothing was reserved.
 * `retryAfter` says when the call would pass if nothing else arrived; `result` is the limiter's whole answer.
 */
export class WaitExceededError extends RateLimitError {
  readonly retryAfter: number
  readonly result: RateLimitResult

  /** `horizonMs`: the limiter's `reservationHorizon`, when it, not `maxWait`, bounded the wait. */
  constructor(result: RateLimitResult, maxWaitMs: number, horizonMs?: number) {
    const [option, bound] =
      horizonMs === undefined ? ['maxWait', maxWaitMs] : ['reservationHorizon', horizonMs]
    super(
      'ERR_RATEWINDOW_WAIT_EXCEEDED',
      result.manualBlock !== undefined
        ? `\`${result.key}\` is blocked by an operator for ${result.blocked ?? result.retryAfter} ms: the call is refused (one already waiting when its slot comes, its slot given back). \`error.result.manualBlock\` holds the block.`
        : result.blocked !== undefined
          ? `\`${result.key}\` is blocked by a penalty for ${result.blocked} ms, beyond \`${option}\` (${bound} ms): nothing was reserved.`
          : horizonMs === undefined
            ? `The earliest slot for \`${result.key}\` is ${result.retryAfter} ms away, beyond \`maxWait\` (${maxWaitMs} ms): nothing was reserved. Raise \`maxWait\`, or try again after \`error.retryAfter\` ms.`
            : `The earliest slot for \`${result.key}\` is ${result.retryAfter} ms away, beyond the limiter's \`reservationHorizon\` (${horizonMs} ms), which bounds every wait: nothing was reserved. Try again after \`error.retryAfter\` ms, or raise \`reservationHorizon\` (docs/waiting.md says what a longer one costs).`,
      { option },
    )
    this.retryAfter = result.retryAfter
    this.result = result
  }
}

/**
 * @internal One limiter's waits for reserved slots: whether its rules and store can reserve at all, the requests
 * waiting now (`wait()` and the HTTP `delay`), on one timer for all, and the slots of those that leave, given back.
 */
export class SlotWaits {
  /** The policy of a wait when the store fails: the limiter's `onStoreError` when set, else `'deny'`. */
  readonly onStoreError: 'allow' | 'deny'
  /** The limiter's `reservationHorizon`, ms: no slot is reserved further ahead. */
  readonly horizonMs: number
  /** Why the limiter cannot reserve slots, or undefined when it can. */
  readonly #cannotReserve: string | undefined
  readonly #queue = new WaitQueue()
  readonly #giveBack: (result: RateLimitResult) => Promise<void>
  /** The slots held by waiters, where a rule gives back only the last slot reserved (reserved-slots.ts). */
  readonly #held: ReservedSlots | undefined
  /** When each reservation's call was sent (steady time), for its wait's lower bound (`WaitQueue.waitForSlot`). */
  readonly #sentAt = new WeakMap<RateLimitResult, number>()
  /** The limiter's peek of a key, when it keeps manual blocks (`overrides: true`): read when a slot comes. */
  readonly #peek: ((key: string) => Promise<RateLimitResult>) | undefined

  /**
   * `rules`: the rules that decide a reservation (the enforcing ones, or all in shadow mode); `giveBack`: the
   * limiter's refund, for the slot of a waiter that leaves; `config`: the limiter's resolved options; `peek`: the
   * limiter's peek (a store call that reads the key's override record), for a limiter with `overrides: true`.
   */
  constructor(
    store: Store,
    rules: readonly Rule[],
    giveBack: (result: RateLimitResult) => Promise<void>,
    config: { waitOnStoreError: 'allow' | 'deny'; reservationHorizonMs: number },
    peek?: (key: string) => Promise<RateLimitResult>,
  ) {
    this.onStoreError = config.waitOnStoreError
    this.horizonMs = config.reservationHorizonMs
    this.#cannotReserve = cannotReserve(store, rules)
    this.#giveBack = giveBack
    this.#peek = peek
    this.#held = rules.some((rule) => rule.logic.lastSlotOnly === true)
      ? new ReservedSlots(giveBack)
      : undefined
  }

  /** Requests waiting now. */
  get size(): number {
    return this.#queue.size
  }

  /**
   * Marks `result` (a reservation, or its promise) with the steady time its call was sent (`sending()`), which
   * `forSlot` waits no earlier than, plus its delay.
   */
  sent(result: Awaitable<RateLimitResult>, sentAt: number): Awaitable<RateLimitResult> {
    if (result instanceof Promise) return result.then((each) => this.sent(each, sentAt))
    this.#sentAt.set(result, sentAt)
    return result
  }

  /** The steady time now: a reservation's sending time, for `sent`. */
  sending(): number {
    return this.#queue.now()
  }

  /** Throws, naming `option`, when the limiter cannot reserve slots. */
  check(option: string): void {
    if (this.#cannotReserve !== undefined) {
      throw new RateLimitError('ERR_RATEWINDOW_INVALID_OPTION', `\`${option}\`: ${this.#cannotReserve}`, {
        option,
      })
    }
  }

  /**
   * Waits for the reserved slot of `result` (one with `delay`), under the one timer. On abort, gives the slot
   * back (latest first among this process's waiters, where the rules need it) and rejects with the signal's reason.
   * When the slot comes, a limiter that keeps manual blocks reads the key's record (one peek): a key blocked while
   * the call waited, by this process or another, gives the slot back and rejects with a `WaitExceededError`
   * whose `result` holds the block (docs/operating-limits.md).
   */
  async forSlot(result: RateLimitResult, signal?: WaitSignal): Promise<void> {
    const delay = result.delay ?? 0
    const held = this.#held?.hold(result)
    try {
      // Only the store's answers share its clock (a fallback store keeps its own).
      if (result.source !== 'store') await this.#queue.wait(delay, signal)
      else await this.#queue.waitForSlot(result.at, delay, signal, this.#sentAt.get(result))
    } catch (reason) {
      await this.#leave(result, held)
      throw reason
    }
    if (this.#peek !== undefined) {
      const blocked = await this.#blockedNow(this.#peek, result.key)
      // Left during that read, or blocked: the slot goes back.
      if (blocked !== undefined || signal?.aborted === true) {
        await this.#leave(result, held)
        throw blocked === undefined ? signal!.reason : new WaitExceededError(blocked, 0)
      }
    }
    if (held !== undefined) this.#held!.served(held)
  }

  /**
   * The refusal of `key` when an operator blocked it (the record as the store reads it now); undefined when it is
   * not blocked, or when the store cannot answer (the slot was reserved before: the call goes).
   */
  async #blockedNow(
    peek: (key: string) => Promise<RateLimitResult>,
    key: string,
  ): Promise<RateLimitResult | undefined> {
    const now = await peek(key).catch(() => undefined)
    return now?.manualBlock === undefined ? undefined : now
  }

  /** A waiter leaves: its slot goes back (latest first among this process's waiters, where the rules need it). */
  #leave(result: RateLimitResult, held: ReturnType<ReservedSlots['hold']> | undefined): Promise<void> {
    return (held === undefined ? this.#giveBack(result) : this.#held!.left(held)).catch(ignore)
  }
}

// A refund rejects only for a bad key or cost, which a result the limiter answered cannot have.
const ignore = (): void => {}

/** What a wait needs of its limiter. */
export interface Reserving {
  /** The limiter's waits: their failure policy and horizon (`SlotWaits`). */
  readonly waiting: { readonly onStoreError: 'allow' | 'deny'; readonly horizonMs: number }
  checkReservations(option: string): void
  limitNow(
    key: string,
    options?: { cost?: number; plan?: string },
    reserve?: number,
    onStoreError?: 'allow' | 'deny',
  ): Awaitable<RateLimitResult>
  waitForSlot(result: RateLimitResult, signal?: WaitSignal): Promise<void>
  refund(result: RateLimitResult): Promise<void>
}

/** `RateLimiter.wait`: reserves a slot within `maxWait` and waits for it, giving it back on abort. */
export async function waitFor(
  limiter: Reserving,
  key: string,
  options: WaitOptions = {},
): Promise<RateLimitResult> {
  requireObject(options, 'options', "{ maxWait: '30s', signal }")
  rejectUnknownOptions(options, WAIT_OPTIONS, 'wait')
  const { maxWait = WAIT_DEFAULTS.maxWait, signal, cost = WAIT_DEFAULTS.cost } = options
  // 0: never wait (a slot free now, or a rejection).
  const maxWaitMs = maxWait === 0 ? 0 : parseTimerDuration(maxWait, 'maxWait')
  if (signal !== undefined && !isSignal(signal))
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'signal', signal, 'an AbortSignal')
  const onStoreError = options.onStoreError ?? limiter.waiting.onStoreError
  oneOf(onStoreError, 'onStoreError', ['allow', 'deny'])
  limiter.checkReservations('wait')
  if (signal?.aborted) throw signal.reason
  const { plan } = options
  const result = await limiter.limitNow(
    key,
    plan === undefined ? { cost } : { cost, plan },
    maxWaitMs,
    onStoreError,
  )
  if (!result.allowed) {
    if (result.source === 'policy') {
      throw new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        "The store failed and no slot could be reserved: `wait()` and `schedule()` refuse on a store failure unless `onStoreError: 'allow'` is set, on the limiter or in the call's options (docs/waiting.md).",
      )
    }
    const horizonMs = limiter.waiting.horizonMs
    const beyondHorizon = horizonMs < maxWaitMs && result.retryAfter > horizonMs
    throw new WaitExceededError(result, maxWaitMs, beyondHorizon ? horizonMs : undefined)
  }
  const delay = result.delay ?? 0
  if (delay === 0 || result.shadow === true) {
    if (signal?.aborted) {
      await limiter.refund(result)
      throw signal.reason
    }
    return result
  }
  // Aborted while waiting: the slot goes back (`SlotWaits.forSlot`), and the wait rejects with the reason.
  await limiter.waitForSlot(result, signal)
  return result
}

/** `RateLimiter.schedule`: runs `fn` once `waitFor` resolves. */
export async function schedule<T>(
  limiter: Reserving,
  key: string,
  fn: () => T | PromiseLike<T>,
  options?: WaitOptions,
): Promise<T> {
  if (typeof fn !== 'function') throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'fn', fn, 'a function')
  await waitFor(limiter, key, options)
  return fn()
}

function isSignal(value: unknown): value is WaitSignal {
  const signal = value as WaitSignal | null
  return (
    typeof signal === 'object' &&
    signal !== null &&
    typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function' &&
    typeof signal.removeEventListener === 'function'
  )
}

/** Why `rules` on `store` cannot reserve slots, or undefined when they can. */
function cannotReserve(store: Store, rules: readonly Rule[]): string | undefined {
  const rule = rules.find((each) => each.logic.wait === undefined || each.logic.reserve === undefined)
  if (rule !== undefined) {
    return `rule ${rule.name} is a ${rule.algorithm}, which cannot reserve a slot: its next window admits a whole burst of \`limit\` at once at the boundary, so the earliest admission of a waiting request is either that burst or a guess. Use gcra({ limit, window }) (evenly spaced, exact slots), tokenBucket or slidingWindowLog.`
  }
  if (store.reservations !== true) {
    const name = store.constructor?.name ?? 'a custom store'
    const why =
      name === 'SyncedStore'
        ? ' SyncedStore cannot: its counts reach the other processes only at its next sync, so a slot reserved here could be given there too.'
        : ''
    return `the store (${name}) cannot reserve slots (\`reservations\` is not true).${why} Use RedisStore or MemoryStore.`
  }
  return undefined
}
