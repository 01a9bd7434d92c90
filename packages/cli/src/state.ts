/**
 * What a scan finds, read with core's code: the store's keys listed by the store itself (`scanStoredKeys`, a SCAN
 * script per master), namespaces decoded into limiters (`decodeNamespace`, or the config's limiter of that
 * namespace), and the limiter a namespace's keys are read with by `top` (`topStored`).
 */
import type { RateLimiter, Rule } from '@ratewindow/core'
import {
  decodeNamespace,
  type StoredLimiter,
  type StoredNamespace,
  scanStoredKeys,
} from '@ratewindow/core/stored'
import type { Connection } from './redis.js'

/** A namespace found by the scan, with what decodes it. */
export interface FoundNamespace {
  decoded: StoredNamespace
  /** The config's limiter counting (or keeping records) under it. */
  limiter: RateLimiter | undefined
  /** The rules its keys are read with: the config limiter's, else the decoded ones; none when unknown. */
  rules: readonly Rule[] | undefined
  /** The hash tags of the counters found under it. */
  hashes: Set<string>
  /** The override records found under it (an override scope). */
  records: number
}

/** A scan's findings. */
export interface Scan {
  /** Keys read. */
  scanned: number
  /** Whether the scan read the whole keyspace (false: `--scan` stopped it). */
  complete: boolean
  namespaces: Map<string, FoundNamespace>
}

/** The config's limiter counting, or keeping records, under `namespace`. */
function configuredFor(namespace: string, limiters: readonly RateLimiter[]): RateLimiter | undefined {
  return limiters.find((each) => each.namespace === namespace || each.overrides.scope === namespace)
}

/** Scans the store's keys (at most `limit`) and decodes them. */
export async function scanStore(
  connection: Connection,
  limit: number,
  limiters: readonly RateLimiter[],
  progress?: (scanned: number) => void,
): Promise<Scan> {
  const namespaces = new Map<string, FoundNamespace | undefined>()
  const totals = await scanStoredKeys(
    connection.store,
    { scan: limit, ...(progress && { progress }) },
    (key) => {
      if (!namespaces.has(key.namespace)) {
        const decoded = decodeNamespace(key.namespace)
        const limiter = decoded && configuredFor(key.namespace, limiters)
        namespaces.set(
          key.namespace,
          decoded && {
            decoded,
            limiter,
            rules: limiter?.rules ?? decoded.rules,
            hashes: new Set(),
            records: 0,
          },
        )
      }
      const found = namespaces.get(key.namespace)
      if (found === undefined) return
      if (key.part.kind === 'override') found.records++
      if (key.part.kind === 'rule') found.hashes.add(key.hash)
    },
  )
  const decoded = new Map<string, FoundNamespace>()
  for (const [namespace, found] of namespaces) if (found !== undefined) decoded.set(namespace, found)
  return { ...totals, namespaces: decoded }
}

/**
 * The limiter `top` reads a counter namespace's keys with: the config's (its name, rules and override scope), else
 * the one its name spells; undefined when neither tells the rules, or `wanted` (a name or namespace) is another.
 */
export function limiterOf(
  namespace: string,
  limiters: readonly RateLimiter[],
  wanted: string | undefined,
): StoredLimiter | undefined {
  const decoded = decodeNamespace(namespace)
  if (decoded?.kind !== 'counters') return undefined
  const limiter = configuredFor(namespace, limiters)
  const rules = limiter?.rules ?? decoded.rules
  if (rules === undefined) return undefined
  if (wanted !== undefined && limiter?.name !== wanted && namespace !== wanted) return undefined
  const scope = limiter?.overrides.scope
  return {
    name: limiter?.name ?? namespace,
    rules,
    ...(scope !== undefined && { overrides: scope }),
    ...(limiter?.operator.plans !== undefined && { plans: limiter.operator.plans }),
  }
}
