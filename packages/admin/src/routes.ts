import type {
  BlockOptions,
  Inspection,
  LimiterOperator,
  LimitOverride,
  OverrideList,
  OverrideRecord,
  OverrideSetOptions,
} from '@ratewindow/core'
import { namesOf, rejectUnknownOptions } from '@ratewindow/core/support'
import type { AdminConfig } from './options.js'
import { AdminError } from './reply.js'
import type { AdminStatsView } from './stats.js'

/** One request, matched: the limiter and key of its path, its query, its body (actions), who called. */
export interface Call {
  config: AdminConfig
  /** The limiter's operator handle (`limiter.overrides`). */
  limiter: LimiterOperator
  key: string
  query: URLSearchParams
  body: Record<string, unknown>
  actor: string | undefined
}

export interface Route {
  method: 'GET' | 'POST'
  /** Path segments; `:limiter` and `:key` take one segment each (URL-decoded). */
  path: readonly string[]
  /** Body fields an action takes, or query names a reading takes. */
  names: readonly string[]
  run(call: Call): Promise<unknown> | unknown
}

/** The largest `count` of an overrides page: a hint to the store's scan, kept to what one answer should carry. */
const MAX_PAGE = 1000

/** The most keys `GET /limiters/:limiter/top` reads (`scan`), and its default; the rows' default (`count`). */
const MAX_SCAN = 1_000_000
const TOP_DEFAULTS = { count: 10, scan: 10_000 } as const

/** The longest client key the endpoint takes in a path (an override or block keeps at most 128 characters). */
export const MAX_KEY_LENGTH = 1024

/**
 * `GET /limiters`: each limiter, its rules (with plans, the first plan's; each key's own are in its views) and its
 * plans' names, and whether it takes overrides.
 */
function limiters({ config }: Call) {
  return {
    limiters: [...config.limiters.values()].map((limiter) => ({
      name: limiter.limiter,
      rules: limiter.rules.map((rule) => ({
        name: rule.name,
        algorithm: rule.algorithm,
        limit: rule.limit,
        window: rule.windowMs,
      })),
      ...(limiter.plans !== undefined && { plans: limiter.plans.names }),
      overrides: limiter.enabled,
    })),
  }
}

const OK = { ok: true } as const
const NONE: readonly string[] = []
const BLOCK = namesOf<Omit<BlockOptions, 'actor'>>({ for: true, reason: true })
const SET = namesOf<{ override: LimitOverride } & Omit<OverrideSetOptions, 'actor'>>({
  override: true,
  ttl: true,
})

/** The record of `key` once an action applied, or `{ key }` when nothing is left. */
async function recordAfter({ limiter, key }: Call): Promise<OverrideRecord> {
  return (await limiter.record(key)) ?? { key }
}

/** Every route of the contract (docs/operations.md, "Admin endpoint"). GET reads; POST acts. */
export const ROUTES: readonly Route[] = [
  { method: 'GET', path: ['limiters'], names: NONE, run: limiters },
  {
    method: 'GET',
    path: ['limiters', ':limiter', 'keys', ':key'],
    names: NONE,
    run: ({ limiter, key }): Promise<Inspection> => limiter.inspect(key),
  },
  {
    method: 'POST',
    path: ['limiters', ':limiter', 'keys', ':key', 'reset'],
    names: NONE,
    run: async ({ limiter, key }) => {
      await limiter.reset(key)
      return OK
    },
  },
  {
    method: 'POST',
    path: ['limiters', ':limiter', 'keys', ':key', 'block'],
    names: BLOCK,
    run: async (call) => {
      const { for: duration, reason } = call.body as unknown as BlockOptions
      const options: BlockOptions = { for: duration }
      if (reason !== undefined) options.reason = reason
      if (call.actor !== undefined) options.actor = call.actor
      await call.limiter.block(call.key, options)
      return recordAfter(call)
    },
  },
  {
    method: 'POST',
    path: ['limiters', ':limiter', 'keys', ':key', 'unblock'],
    names: NONE,
    run: async ({ limiter, key, actor }) => {
      await limiter.unblock(key, actor === undefined ? {} : { actor })
      return OK
    },
  },
  {
    method: 'GET',
    path: ['limiters', ':limiter', 'overrides'],
    names: ['cursor', 'count'],
    run: async ({ limiter, query }) => {
      const cursor = query.get('cursor') || undefined
      const count = wholeQuery(query, 'count', MAX_PAGE)
      const page: OverrideList = await limiter.list({
        ...(cursor === undefined ? {} : { cursor }),
        ...(count === undefined ? {} : { count }),
      })
      return { records: page.records, cursor: page.cursor ?? null }
    },
  },
  {
    method: 'GET',
    path: ['limiters', ':limiter', 'overrides', ':key'],
    names: NONE,
    run: async ({ limiter, key }) => {
      const record = await limiter.record(key)
      if (record === undefined)
        throw new AdminError(
          404,
          'ERR_RATEWINDOW_NOT_FOUND',
          `No override or block for this key in ${limiter.limiter}.`,
        )
      return record
    },
  },
  {
    method: 'POST',
    path: ['limiters', ':limiter', 'overrides', ':key'],
    names: SET,
    run: async (call) => {
      const { override, ttl } = call.body as { override?: unknown; ttl?: OverrideSetOptions['ttl'] }
      if (override === undefined)
        throw new AdminError(
          400,
          'ERR_RATEWINDOW_INVALID_REQUEST',
          'The body needs `override`, e.g. { "override": { "limit": 1000 } }.',
        )
      const options: OverrideSetOptions = {}
      if (ttl !== undefined) options.ttl = ttl
      if (call.actor !== undefined) options.actor = call.actor
      await call.limiter.set(call.key, override as LimitOverride, options)
      return recordAfter(call)
    },
  },
  {
    method: 'POST',
    path: ['limiters', ':limiter', 'overrides', ':key', 'delete'],
    names: NONE,
    run: async ({ limiter, key, actor }) => {
      await limiter.delete(key, actor === undefined ? {} : { actor })
      return OK
    },
  },
  {
    method: 'GET',
    path: ['limiters', ':limiter', 'top'],
    names: ['count', 'scan'],
    run: async ({ limiter, query }) => {
      if (!limiter.ranks)
        throw new AdminError(
          404,
          'ERR_RATEWINDOW_NOT_FOUND',
          `No top for ${limiter.limiter}: its store cannot be scanned (MemoryStore and RedisStore can).`,
        )
      const count = wholeQuery(query, 'count', MAX_PAGE) ?? TOP_DEFAULTS.count
      const scan = wholeQuery(query, 'scan', MAX_SCAN) ?? TOP_DEFAULTS.scan
      const top = await limiter.top({ count, scan })
      const keys = top.keys.map(({ key, rule, used, limit, remaining, plan }) => ({
        key,
        ...(plan !== undefined && { plan }),
        rule,
        used,
        limit,
        remaining,
      }))
      return { keys, scanned: top.scanned }
    },
  },
  {
    method: 'GET',
    path: ['stats'],
    names: ['count'],
    run: ({ config, query }): AdminStatsView => {
      if (config.stats === undefined)
        throw new AdminError(
          404,
          'ERR_RATEWINDOW_NOT_FOUND',
          'No stats: give the endpoint `stats: adminStats()` and the limiters `observer: stats`.',
        )
      const count = wholeQuery(query, 'count', config.stats.capacity) ?? 20
      return config.stats.view(count)
    },
  },
]

/**
 * A query parameter that must be a whole number from 1 to `max`; undefined when absent or empty (`?count=`).
 */
function wholeQuery(query: URLSearchParams, name: string, max: number): number | undefined {
  const value = query.get(name) ?? ''
  if (value === '') return undefined
  const number = /^\d{1,9}$/.test(value) ? Number(value) : Number.NaN
  if (number >= 1 && number <= max) return number
  throw new AdminError(
    400,
    'ERR_RATEWINDOW_INVALID_REQUEST',
    `\`${name}\` must be a whole number from 1 to ${max}; received ${JSON.stringify(value.slice(0, 40))}.`,
  )
}

/** Rejects query names or body fields a route does not take (typos would otherwise be ignored). */
export function rejectUnknown(route: Route, call: Call): void {
  const label = `${route.method} /${route.path.join('/')}`
  if (route.method === 'POST') rejectUnknownOptions(call.body, route.names, label)
  else rejectUnknownOptions(Object.fromEntries(call.query), route.names, label)
}
