/**
 * What SyncedStore does when this process's view cannot decide a call. While Redis fails, decisions go on from
 * the last known counts for `maxStale`; past it every call fails, so that the limiter's failure policy answers.
 * Rules it cannot synchronise (any algorithm but the sliding window counter and the fixed window) are decided by
 * the exact fallback: a `RedisStore` on the same client, one round trip per request; it also writes and reads the
 * override records.
 */
import { RateLimitError } from '../../support/errors.js'
import type { RedisClient } from '../redis/clients/index.js'
import { RedisStore } from '../redis/redis.js'
import type { Store } from '../types.js'

/** @internal SyncedStore's failure mode and exact fallback (see the file's comment). */
export class FailureMode {
  readonly #maxStale: number
  readonly #fallback: { client: RedisClient; prefix: string; clock: (() => number) | undefined }
  /** The store's clock (the sync loop's). */
  readonly #now: () => number
  #failingSince: number | undefined
  #lastError: unknown
  #exact: RedisStore | undefined

  constructor(
    maxStale: number,
    fallback: { client: RedisClient; prefix: string; clock: (() => number) | undefined },
    now: () => number,
  ) {
    this.#maxStale = maxStale
    this.#fallback = fallback
    this.#now = now
  }

  /** A sync succeeded: Redis answers. */
  synced(): void {
    this.#failingSince = undefined
  }

  /** A sync failed: the stale period starts with the first failure in a row. */
  failed(error: unknown): void {
    this.#failingSince ??= this.#now()
    this.#lastError = error
  }

  /** Throws once Redis has failed for longer than `maxStale`, so that the limiter's failure policy answers. */
  checkReachable(): void {
    if (this.#failingSince !== undefined && this.#now() - this.#failingSince > this.#maxStale) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        `Redis has not answered a sync for more than \`maxStale\` (${this.#maxStale} ms).`,
        { cause: this.#lastError },
      )
    }
  }

  /**
   * The exact store, made on first use: it decides rules that cannot be synchronised, and keeps the override
   * records (SyncedStore's `updateOverride`, `readOverride`, `listOverrides` are RedisStore's, on the same client).
   */
  exact(): RedisStore {
    this.#exact ??= new RedisStore(this.#fallback)
    return this.#exact
  }

  /** Closes the exact store, when one was made. */
  async close(): Promise<void> {
    await (this.#exact as Store | undefined)?.close?.()
  }
}
