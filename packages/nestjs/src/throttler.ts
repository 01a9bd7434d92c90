/**
 * `@ratewindow/nestjs/throttler`: a storage for `@nestjs/throttler` 6 on our stores' backends, for an app that
 * keeps its `@Throttle()` decorators: `ThrottlerModule.forRoot({ throttlers, storage: new ThrottlerStore(…) })`.
 */

import { createHash } from 'node:crypto'
import { RateLimitError, type RedisClient, type RedisScriptRunner, scriptRunnerFor } from '@ratewindow/core'
import { fnOption, invalid, rejectUnknownOptions, requireObject, wholeNumber } from '@ratewindow/core/support'

/** What `ThrottlerStorage.increment` answers (`ThrottlerStorageRecord` of @nestjs/throttler). */
export interface ThrottlerRecord {
  /** Hits within the window, the one refused included. */
  totalHits: number
  /** Seconds until the window ends. */
  timeToExpire: number
  isBlocked: boolean
  /**
   * Seconds until the block ends (what the throttler sends as Retry-After); 0 when not blocked (the throttler's own
   * storage then answers a stale or negative number, which its guard never reads).
   */
  timeToBlockExpire: number
}

export interface ThrottlerStoreOptions {
  /**
   * A Redis client, standalone or Cluster, as `RedisStore` takes it (ioredis, iovalkey, node-redis, Valkey GLIDE,
   * or a `RedisScriptRunner`): each `increment` is one script call, on the server's clock. Without it, the
   * counters live in this process's memory.
   */
  client?: RedisClient
  /** Prepended to every key. @default 'throttler:' */
  prefix?: string
  /** Time in epoch ms, for tests. @default the Redis server's TIME; `Date.now` in memory */
  clock?: () => number
  /**
   * Memory only: the most keys kept; past it the least recently used key is forgotten (its client starts afresh).
   * Keys whose window, hits and block have all passed are dropped as they are met. @default 100000
   */
  maxKeys?: number
}

const OPTIONS = ['client', 'prefix', 'clock', 'maxKeys']

/** One key's state, as @nestjs/throttler keeps it: a window, each hit's expiry, a block. */
interface Entry {
  /** When the window ends (ms). */
  expiresAt: number
  blockExpiresAt: number
  isBlocked: boolean
  /** Each counted hit's expiry (ms), oldest first. */
  hits: number[]
  /** When nothing of this entry matters any more (ms). */
  until: number
}

/**
 * A `ThrottlerStorage` for `@nestjs/throttler` 6 with its own storage's semantics (a hit counts for `ttl` ms; the
 * window restarts once `ttl` has passed; over `limit` the key is blocked for `blockDuration` ms, and the refused
 * hit counts), in bounded memory or on Redis (Cluster-safe: a key's two Redis keys share a hash slot).
 */
export class ThrottlerStore {
  readonly #runner: RedisScriptRunner | undefined
  readonly #prefix: string
  readonly #clock: (() => number) | undefined
  readonly #maxKeys: number
  readonly #memory = new Map<string, Entry>()

  constructor(options: ThrottlerStoreOptions = {}) {
    requireObject(options, 'ThrottlerStore', '{ client: redis }')
    rejectUnknownOptions(options, OPTIONS, 'ThrottlerStore')
    const { client, prefix = 'throttler:', clock, maxKeys = 100_000 } = options
    if (typeof prefix !== 'string')
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'prefix', prefix, 'a string')
    if (clock !== undefined) fnOption(clock, 'clock', 'a function returning epoch ms')
    wholeNumber(maxKeys, 'maxKeys', { min: 1, allowed: 'a whole number >= 1' })
    if (client !== undefined) {
      this.#runner = scriptRunnerFor(client)
      if (this.#runner === undefined) {
        throw new RateLimitError(
          'ERR_RATEWINDOW_INVALID_OPTION',
          '`client` is not a Redis client ThrottlerStore knows (ioredis, iovalkey, node-redis, Valkey GLIDE) nor a RedisScriptRunner.',
          { option: 'client' },
        )
      }
    }
    this.#prefix = prefix
    this.#clock = clock
    this.#maxKeys = maxKeys
  }

  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    _throttlerName: string,
  ): Promise<ThrottlerRecord> {
    // The throttler's keys already hold the throttler's name (a hash of class, handler, name and tracker).
    if (this.#runner !== undefined) return this.#redis(this.#runner, key, ttl, limit, blockDuration)
    return this.#inMemory(key, ttl, limit, blockDuration, (this.#clock ?? Date.now)())
  }

  #inMemory(key: string, ttl: number, limit: number, blockDuration: number, now: number): ThrottlerRecord {
    const memory = this.#memory
    let entry = memory.get(key)
    if (entry !== undefined) memory.delete(key) // re-inserted below: the Map's order is least recently used first
    if (entry === undefined || entry.until <= now) {
      entry = { expiresAt: now + ttl, blockExpiresAt: 0, isBlocked: false, hits: [], until: 0 }
    }
    const { hits } = entry
    let live = 0
    while (live < hits.length && hits[live]! <= now) live++
    if (live > 0) hits.splice(0, live)
    let timeToExpire = Math.ceil((entry.expiresAt - now) / 1000)
    if (timeToExpire <= 0) {
      entry.expiresAt = now + ttl
      timeToExpire = Math.ceil((entry.expiresAt - now) / 1000)
    }
    let record: ThrottlerRecord
    if (blockDuration <= 0) {
      const isBlocked = hits.length >= limit
      if (!isBlocked) hits.push(now + ttl)
      const timeToBlockExpire = hits.length > 0 ? Math.ceil((hits[0]! - now) / 1000) : timeToExpire
      record = {
        totalHits: hits.length + (isBlocked ? 1 : 0),
        timeToExpire,
        isBlocked,
        timeToBlockExpire: isBlocked ? timeToBlockExpire : 0,
      }
    } else {
      if (!entry.isBlocked) hits.push(now + ttl)
      if (hits.length > limit && !entry.isBlocked) {
        entry.isBlocked = true
        entry.blockExpiresAt = now + blockDuration
      }
      const timeToBlockExpire = Math.ceil((entry.blockExpiresAt - now) / 1000)
      if (timeToBlockExpire <= 0 && entry.isBlocked) {
        entry.isBlocked = false
        hits.length = 0
        hits.push(now + ttl)
      }
      record = {
        totalHits: hits.length,
        timeToExpire,
        isBlocked: entry.isBlocked,
        timeToBlockExpire: entry.isBlocked ? timeToBlockExpire : 0,
      }
    }
    // Past this, the entry answers as a fresh one would: it can go.
    entry.until = Math.max(entry.expiresAt, entry.blockExpiresAt, now + ttl)
    memory.set(key, entry)
    this.#sweep(now)
    return record
  }

  /** Drops a few of the least recently used entries that are over, and the oldest past `maxKeys`. */
  #sweep(now: number): void {
    const memory = this.#memory
    let looked = 0
    for (const [key, entry] of memory) {
      if (memory.size > this.#maxKeys || entry.until <= now) memory.delete(key)
      else if (++looked >= 2) break
    }
  }

  async #redis(
    runner: RedisScriptRunner,
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
  ): Promise<ThrottlerRecord> {
    // One hash tag: the state and the hits of a key live in one slot of a Cluster.
    const base = `${this.#prefix}{${key}}`
    const keys = [base, `${base}:h`]
    const now = this.#clock === undefined ? -1 : this.#clock()
    const args = [ttl, limit, blockDuration, now].map(String)
    let reply: unknown
    try {
      reply = await runner.evalSha(SCRIPT_SHA, keys, args)
    } catch (error) {
      // The node lacks the script (first call, a restart, a failover): EVAL sends it, and caches it there.
      if (!(error instanceof Error && /\bNOSCRIPT\b|NoScriptError/.test(error.message))) throw error
      reply = await runner.eval(SCRIPT, keys, args)
    }
    const [totalHits, timeToExpire, isBlocked, timeToBlockExpire] = (reply as unknown[]).map(Number) as [
      number,
      number,
      number,
      number,
    ]
    return { totalHits, timeToExpire, isBlocked: isBlocked === 1, timeToBlockExpire }
  }

  /** Forgets every key kept in memory (a Redis store keeps its keys until they expire). */
  onApplicationShutdown(): void {
    this.#memory.clear()
  }
}

/** The memory algorithm above in Lua: state in a hash (window end, block end, blocked, hit sequence), hits in a sorted set. */
const SCRIPT = `
local rk, hk = KEYS[1], KEYS[2]
local ttl, limit, block, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if now < 0 then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local state = redis.call('HMGET', rk, 'e', 'b', 'x', 'n')
local e, b, x, n = tonumber(state[1]), tonumber(state[2]) or 0, state[3] == '1', tonumber(state[4]) or 0
if e == nil then e = now + ttl end
redis.call('ZREMRANGEBYSCORE', hk, '-inf', now)
local hits = redis.call('ZCARD', hk)
local tte = math.ceil((e - now) / 1000)
if tte <= 0 then
  e = now + ttl
  tte = math.ceil((e - now) / 1000)
end
local function fire()
  n = n + 1
  redis.call('ZADD', hk, now + ttl, n)
  hits = hits + 1
end
local reply
if block <= 0 then
  local blocked = hits >= limit
  if not blocked then fire() end
  local ttbe = tte
  if hits > 0 then
    local first = redis.call('ZRANGE', hk, 0, 0, 'WITHSCORES')
    ttbe = math.ceil((tonumber(first[2]) - now) / 1000)
  end
  reply = { hits + (blocked and 1 or 0), tte, blocked and 1 or 0, blocked and ttbe or 0 }
else
  if not x then fire() end
  if hits > limit and not x then
    x = true
    b = now + block
  end
  local ttbe = math.ceil((b - now) / 1000)
  if ttbe <= 0 and x then
    x = false
    redis.call('DEL', hk)
    hits = 0
    fire()
  end
  reply = { hits, tte, x and 1 or 0, x and ttbe or 0 }
end
-- Relative to \`now\`, which may be a driven clock: past this, the key answers as a fresh one would.
local keep = math.max(e, b, now + ttl) - now
redis.call('HSET', rk, 'e', e, 'b', b, 'x', x and 1 or 0, 'n', n)
redis.call('PEXPIRE', rk, keep)
if hits > 0 then redis.call('PEXPIRE', hk, keep) end
return reply
`
const SCRIPT_SHA = createHash('sha1').update(SCRIPT).digest('hex')
