/** RedisStore's options: their types, names and defaults, and their parse into a complete configuration. */
import { type Duration, parseTimerDuration } from '../../support/duration.js'
import { requireObject } from '../../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../../support/option-names.js'
import { fnOption, prefixOption, wholeNumber } from '../../support/validators.js'
import { storeKeyPrefix } from '../key-prefix.js'
import { clientOption, type RedisClient, type RedisScriptRunner } from './clients/index.js'
import { DEFAULT_MAX_WAITING } from './groups.js'

export interface RedisStoreOptions {
  /**
   * A connected client, standalone or Cluster, recognised by its shape: ioredis 5/6 or iovalkey (`Redis`,
   * `Cluster`), node-redis 5/6 (`createClient`, `createCluster`), Valkey GLIDE (`GlideClient`,
   * `GlideClusterClient`); or a `RedisScriptRunner` for any other client. See docs/redis.md for settings that
   * never hang a request.
   */
  client: RedisClient
  /** Prepended to every key, e.g. to share a database between applications. @default '' */
  prefix?: string
  /**
   * Puts a `:` between `prefix` and each limiter's namespace (unless `prefix` is empty or ends with `:`): without
   * it, store prefixes `ab` and `a` beside limiter prefixes `rw` and `brw` make the same keys and share counters.
   * Off by default because it renames the keys of a prefix that does not end with `:` (in a rolling deploy, every
   * count starts afresh beside the old ones): turn it on in a deploy that may do so (docs/redis.md, "Key
   * prefixes"). `prefix: 'app', separator: true` is `prefix: 'app:'`. @default false
   */
  separator?: boolean
  /**
   * Client-side time in epoch ms, for tests and simulations. By default the script reads the Redis server's
   * `TIME`, so clock skew between application servers cannot change a decision.
   */
  clock?: () => number
  /**
   * Decisions that may wait for one Redis node while a call is in flight to it (grouped decisions, docs/redis.md);
   * past it a decision is shed: answered as limited without a store call (`ERR_RATEWINDOW_SHED`, outcome
   * `'shed'`). Counted per client connection and node, which stores on one client share. @default 50000
   */
  maxWaiting?: number
  /**
   * The longest a call waits for a client that has never been ready (ioredis or iovalkey, `Redis` or `Cluster`,
   * making its first connection), in ms or as a duration such as `'2s'`. Meanwhile nothing is sent and the
   * limiter's `timeout` does not run; past it, the calls held fail together (`ERR_RATEWINDOW_STORE_TIMEOUT`) and
   * the failure policy answers (docs/redis.md, "Before the client is ready"). `false` holds nothing: calls go to
   * the client at once, whatever its state, and the limiter's `timeout` runs from then. @default '2s'
   */
  readyTimeout?: Duration | false
}

export const REDIS_STORE_OPTIONS = namesOf<RedisStoreOptions>({
  client: true,
  prefix: true,
  separator: true,
  clock: true,
  maxWaiting: true,
  readyTimeout: true,
})
/** `RedisStoreOptions`' defaults, in one place (the `@default` tags above say the same). */
export const REDIS_STORE_DEFAULTS = {
  prefix: '',
  separator: false,
  maxWaiting: DEFAULT_MAX_WAITING,
  readyTimeout: '2s',
} as const satisfies Partial<RedisStoreOptions>

/** `RedisStoreOptions` checked, with every default filled in. */
export interface RedisStoreConfig {
  client: RedisClient
  /** The client as a script runner (clients/index.ts). */
  runner: RedisScriptRunner
  /** The text before every key: `prefix`, with its `:` under `separator` (key-prefix.ts). */
  prefix: string
  clock: (() => number) | undefined
  maxWaiting: number
  /** The ready timeout, ms; undefined for `readyTimeout: false`. */
  readyTimeoutMs: number | undefined
}

/** Checks `options` once, at construction: an error names the option, what it got and what it takes. */
export function resolveRedisStoreOptions(options: RedisStoreOptions): RedisStoreConfig {
  requireObject(options, 'options', '{ client: new Redis() }')
  rejectUnknownOptions(options, REDIS_STORE_OPTIONS, 'RedisStore')
  const {
    client,
    prefix = REDIS_STORE_DEFAULTS.prefix,
    clock,
    maxWaiting = REDIS_STORE_DEFAULTS.maxWaiting,
    readyTimeout = REDIS_STORE_DEFAULTS.readyTimeout,
  } = options
  const runner = clientOption(client)
  prefixOption(prefix)
  const keyPrefix = storeKeyPrefix(prefix, options.separator)
  if (clock !== undefined) fnOption(clock, 'clock', 'a function returning epoch ms, or undefined')
  wholeNumber(maxWaiting, 'maxWaiting', { min: 0, allowed: 'a whole number >= 0, e.g. 50000' })
  const readyTimeoutMs = readyTimeout === false ? undefined : parseTimerDuration(readyTimeout, 'readyTimeout')
  return { client, runner, prefix: keyPrefix, clock, maxWaiting, readyTimeoutMs }
}
