/**
 * SyncedStore's options: their types and defaults, and the one place that validates them and fills the defaults
 * in (`parseSyncedStoreOptions`, called by the constructor).
 */
import { type Duration, parseDuration } from '../../support/duration.js'
import { invalid, requireObject } from '../../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../../support/option-names.js'
import { throttledErrorLog } from '../../support/report.js'
import { prefixOption, wholeNumber } from '../../support/validators.js'
import { storeKeyPrefix } from '../key-prefix.js'
import { clientOption, type RedisClient, type RedisScriptRunner } from '../redis/clients/index.js'
import type { ScriptRunner } from './script.js'

/** @deprecated `SyncedStore` takes every client `RedisStore` takes: use `RedisClient`. */
export type SyncedRedisClient = RedisClient

export interface SyncedStoreOptions {
  /**
   * A connected client, standalone or Cluster: every client `RedisStore` accepts (ioredis or iovalkey,
   * node-redis, Valkey GLIDE, or a `RedisScriptRunner`), configured as docs/redis.md says.
   */
  client: RedisClient
  /** Prepended to every key. @default '' */
  prefix?: string
  /**
   * Puts a `:` between `prefix` and each limiter's namespace (unless `prefix` is empty or ends with `:`), as
   * RedisStore's `separator` does: off by default, since it renames the keys of a prefix without its `:`
   * (docs/redis.md, "Key prefixes"). @default false
   */
  separator?: boolean
  /**
   * How often each process sends its counts to Redis and reads everyone's back, for every key it used since (in
   * scripts of up to 256 keys). @default '100ms'
   */
  interval?: Duration
  /**
   * Most cost units one process admits for one key that Redis has not yet acknowledged; reaching it sends them
   * at once, and a request past it waits for that round trip. With P processes, at most (P − 1) × maxPending
   * pass beyond the limit (docs/algorithms.md). @default 1% of the smallest limit of the key's rules, at least 1
   */
  maxPending?: number
  /**
   * How long decisions go on from the last known counts while Redis fails (each process still admits at most
   * `maxPending` per key meanwhile); after it, every call fails so that the limiter's failure policy answers.
   * @default '2s'
   */
  maxStale?: Duration
  /** Most keys held in this process; the least recently used is sent to Redis and dropped. @default 100_000 */
  maxKeys?: number
  /** Receives failures of syncs no request waits for (timer, eviction, close). @default a throttled console.error */
  onError?: (error: unknown) => void
  /**
   * Client-side time in epoch ms, for tests and simulations. By default, the Redis server's `TIME`, kept between
   * syncs on this process's steady clock and never read earlier than before. Whatever the clock, a key never moves
   * back to a window older than one it was counted in (docs/algorithms.md, "Clocks that step back").
   */
  clock?: () => number
  /** @internal Sends the script; by default EVALSHA on `client`. */
  runner?: ScriptRunner
}

const SYNCED_STORE_OPTIONS = namesOf<SyncedStoreOptions>({
  client: true,
  prefix: true,
  separator: true,
  interval: true,
  maxPending: true,
  maxStale: true,
  maxKeys: true,
  onError: true,
  clock: true,
  runner: true,
})
/** `SyncedStoreOptions`' defaults, in one place (`maxPending` follows from the limit: see its doc). */
export const SYNCED_STORE_DEFAULTS = {
  prefix: '',
  separator: false,
  interval: '100ms',
  maxStale: '2s',
  maxKeys: 100_000,
} as const satisfies Partial<SyncedStoreOptions>

/** @internal SyncedStoreOptions validated, every default filled in. */
export interface SyncedStoreConfig {
  client: RedisClient
  commands: RedisScriptRunner
  /** The text before every key: `prefix`, with its `:` under `separator` (key-prefix.ts). */
  prefix: string
  intervalMs: number
  maxPending: number | undefined
  maxStale: number
  maxKeys: number
  clock: (() => number) | undefined
  onError: (error: unknown) => void
  runner: ScriptRunner | undefined
}

/** @internal Validates `options` (a coded error naming the option) and fills in the defaults. */
export function parseSyncedStoreOptions(options: SyncedStoreOptions): SyncedStoreConfig {
  requireObject(options, 'options', "{ client: new Redis(), interval: '100ms' }")
  rejectUnknownOptions(options, SYNCED_STORE_OPTIONS, 'SyncedStore')
  const {
    client,
    prefix = SYNCED_STORE_DEFAULTS.prefix,
    interval = SYNCED_STORE_DEFAULTS.interval,
    maxPending,
    maxStale = SYNCED_STORE_DEFAULTS.maxStale,
    maxKeys = SYNCED_STORE_DEFAULTS.maxKeys,
  } = options
  const commands = clientOption(client)
  prefixOption(prefix)
  const keyPrefix = storeKeyPrefix(prefix, options.separator)
  if (maxPending !== undefined) wholeNumber(maxPending, 'maxPending', { min: 1 })
  wholeNumber(maxKeys, 'maxKeys', { min: 1 })
  for (const [name, fn] of [
    ['clock', options.clock],
    ['onError', options.onError],
  ] as const) {
    if (fn !== undefined && typeof fn !== 'function')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', name, fn, 'a function, or undefined')
  }
  return {
    client,
    commands,
    prefix: keyPrefix,
    intervalMs: parseDuration(interval, 'interval'),
    maxPending,
    maxStale: parseDuration(maxStale, 'maxStale'),
    maxKeys,
    clock: options.clock,
    onError: options.onError ?? throttledErrorLog(),
    runner: options.runner,
  }
}
