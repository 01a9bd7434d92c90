/** `limiters` and `top`: what a scan of the store finds, decoded and read with core's code. */
import type { RateLimiter, TopKey } from '@ratewindow/core'
import { topStored } from '@ratewindow/core/stored'
import type { GlobalOptions } from '../args.js'
import { type Connection, recordedKeys } from '../redis.js'
import { duration, type Output, progressLine, table } from '../render.js'
import { limiterOf, scanStore } from '../state.js'

/** `limiters --json`: one entry per namespace found (and per configured limiter, found or not). */
export interface LimitersJson {
  limiters: {
    /** The config's name for it, else null. */
    name: string | null
    namespace: string
    prefix: string
    group: string | null
    /** True for a route limiter (its route is hashed in the namespace). */
    routeScoped: boolean
    /** The rules, when the namespace spells them or the config has them; else null. */
    rules: { name: string; id: string; algorithm: string; limit: number; window: number }[] | null
    /** Client keys with state under it, in the keys scanned. */
    keys: number
  }[]
  /** The override scopes found (`overrides: true`): records per scope. */
  overrideScopes: {
    name: string | null
    scope: string
    prefix: string
    group: string | null
    records: number
  }[]
  /** Keys read by the scan, and whether it read them all (`--scan` bounds it). */
  scanned: number
  complete: boolean
}

/** `top --json`: the keys nearest their limit, most used first. */
export interface TopJson {
  keys: TopRow[]
  scanned: number
  complete: boolean
}

/** A row of `top --json`: core's `TopKey` without what the store holds it by and its whole reading. */
export type TopRow = Omit<TopKey, 'namespace' | 'hash' | 'inspection'>

export async function limiters(
  connection: Connection,
  options: GlobalOptions,
  configured: readonly RateLimiter[],
  output: Output,
): Promise<LimitersJson> {
  const progress = progressLine(output, 'scanned')
  const scan = await scanStore(connection, options.scan, configured, progress.update)
  progress.done()
  const result: LimitersJson = {
    limiters: [],
    overrideScopes: [],
    scanned: scan.scanned,
    complete: scan.complete,
  }
  const counted = new Set<string>()
  for (const found of scan.namespaces.values()) {
    const { decoded, limiter } = found
    if (decoded.kind === 'overrides') {
      result.overrideScopes.push({
        name: limiter?.name ?? null,
        scope: decoded.namespace,
        prefix: decoded.prefix,
        group: decoded.group ?? null,
        records: found.records,
      })
      continue
    }
    counted.add(decoded.namespace)
    result.limiters.push({
      name: limiter?.name ?? null,
      namespace: decoded.namespace,
      prefix: decoded.prefix,
      group: decoded.group ?? null,
      routeScoped: decoded.routeScoped,
      rules: found.rules === undefined ? null : found.rules.map(describeRule),
      keys: found.hashes.size,
    })
  }
  for (const limiter of configured) {
    if (counted.has(limiter.namespace)) continue
    result.limiters.push({
      name: limiter.name,
      namespace: limiter.namespace,
      prefix: limiter.prefix,
      group: limiter.group ?? null,
      routeScoped: false,
      rules: limiter.rules.map(describeRule),
      keys: 0,
    })
  }
  result.limiters.sort((a, b) => b.keys - a.keys || a.namespace.localeCompare(b.namespace))
  if (!options.json) output.print(limitersText(result))
  return result
}

function describeRule(rule: RateLimiter['rules'][number]) {
  return { name: rule.name, id: rule.id, algorithm: rule.algorithm, limit: rule.limit, window: rule.windowMs }
}

function limitersText(result: LimitersJson): string {
  const rows = result.limiters.map((each) => [
    each.name ?? '-',
    each.namespace,
    each.rules === null
      ? '(rules not in the name: pass --config)'
      : each.rules.map((rule) => `${rule.algorithm} ${rule.limit}/${duration(rule.window)}`).join(' + '),
    each.keys,
  ])
  const lines = [table(['NAME', 'NAMESPACE', 'RULES', 'KEYS'], rows)]
  if (result.overrideScopes.length > 0) {
    lines.push(
      '',
      table(
        ['NAME', 'OVERRIDE SCOPE', 'RECORDS'],
        result.overrideScopes.map((each) => [each.name ?? '-', each.scope, each.records]),
      ),
    )
  }
  lines.push('', scannedLine(result))
  return lines.join('\n')
}

export function scannedLine(result: { scanned: number; complete: boolean }): string {
  return result.complete
    ? `${result.scanned.toLocaleString('en-US')} keys scanned (all)`
    : `${result.scanned.toLocaleString('en-US')} keys scanned (stopped by --scan: raise it to see more)`
}

/** `top`: the keys nearest their limit (core's `topStored`, through the connection's RedisStore). */
export async function top(
  connection: Connection,
  options: GlobalOptions,
  configured: readonly RateLimiter[],
  output: Output,
  quiet = false,
): Promise<TopJson> {
  const progress = progressLine(output, quiet ? '' : 'scanned')
  // The override scopes: the config's, and those the scan finds records in.
  const scopes = new Set(configured.flatMap((limiter) => limiter.overrides.scope ?? []))
  const { store } = connection
  const found = await topStored(
    {
      scanStored: async (page) => {
        const step = await store.scanStored(page)
        for (const key of step.keys) if (key.part.kind === 'override') scopes.add(key.namespace)
        return step
      },
      peekStored: (request, hash) => store.peekStored(request, hash),
    },
    {
      count: options.count ?? 10,
      scan: options.scan,
      ...(!quiet && { progress: progress.update }),
      limiterOf: (namespace) => limiterOf(namespace, configured, options.limiter),
    },
  )
  progress.done()
  // The raw keys of the keys shown that the scan did not read a record of (it stopped before it).
  const hashed = found.keys.filter((row) => row.hashed).map((row) => row.hash)
  const raw = await recordedKeys(connection.client, options.prefix, hashed, scopes)
  for (const row of found.keys) {
    const key = raw.get(row.hash)
    if (key !== undefined) Object.assign(row, { key, hashed: false })
  }
  const result: TopJson = { keys: found.keys.map(topRow), scanned: found.scanned, complete: found.complete }
  if (!options.json && !quiet) output.print(topText(result))
  return result
}

function topRow(row: TopKey): TopRow {
  const { limiter, key, hashed, rule, used, limit, remaining, reset, blocked, plan } = row
  return {
    limiter,
    key,
    hashed,
    rule,
    used,
    limit,
    remaining,
    reset,
    blocked,
    ...(plan !== undefined && { plan }),
  }
}

/** Under a table that shows a key as its hash: how to read it, and what acting on it needs. */
const HASHED_KEYS =
  'A key shown as its hash has no override record holding its raw form: `ratewindow inspect --hash <hash>` reads it; ' +
  'reset, block and overrides need the raw key (your logs, or the keys refused most: `ratewindow watch --admin <url>`).'

export function topText(result: TopJson): string {
  // A PLAN column where a limiter has plans (each key's own, as the store recorded it).
  const planned = result.keys.some((row) => row.plan !== undefined)
  const rows = result.keys.map((row) => [
    row.key,
    row.limiter,
    ...(planned ? [row.plan ?? '-'] : []),
    row.rule,
    row.used,
    row.limit,
    `${Math.round((100 * row.used) / row.limit)}%`,
    row.blocked ? 'blocked' : duration(row.reset),
  ])
  const header = ['KEY', 'LIMITER', ...(planned ? ['PLAN'] : []), 'RULE', 'USED', 'LIMIT', 'USE', 'RESET']
  const lines = [table(header, rows), '']
  if (result.keys.some((row) => row.hashed)) lines.push(HASHED_KEYS)
  lines.push(scannedLine(result))
  return lines.join('\n')
}
