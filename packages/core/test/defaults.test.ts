/**
 * Issue 20, item 9: one place per class for its defaults. Each options class keeps its defaults in one constant
 * that the constructor reads, and the `@default` tag of each option in its options interface says the same value.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { PENALTY_DEFAULTS } from '../src/algorithms/penalty.js'
import { CIRCUIT_BREAKER_DEFAULTS } from '../src/gateway/circuit-breaker.js'
import { DELAY_DEFAULTS } from '../src/http/options.js'
import { BLOCKED_CACHE_DEFAULTS } from '../src/limiter/blocked-cache.js'
import { CONCURRENCY_DEFAULTS } from '../src/limiter/concurrency.js'
import { WAIT_DEFAULTS } from '../src/limiter/wait.js'
import { SLOW_DOWN_DEFAULTS } from '../src/slow-down/options.js'
import { MEMORY_STORE_DEFAULTS } from '../src/stores/local/memory-options.js'
import { REDIS_STORE_DEFAULTS } from '../src/stores/redis/options.js'
import { SYNCED_STORE_DEFAULTS } from '../src/stores/synced/options.js'

const CLASSES: [string, string, Record<string, unknown>][] = [
  ['MemoryStoreOptions', 'stores/local/memory-options.ts', MEMORY_STORE_DEFAULTS],
  ['RedisStoreOptions', 'stores/redis/options.ts', REDIS_STORE_DEFAULTS],
  ['SyncedStoreOptions', 'stores/synced/options.ts', SYNCED_STORE_DEFAULTS],
  ['ConcurrencyLimiterOptions', 'limiter/concurrency.ts', CONCURRENCY_DEFAULTS],
  ['CircuitBreakerOptions', 'gateway/circuit-breaker.ts', CIRCUIT_BREAKER_DEFAULTS],
  ['BlockedCacheOptions', 'limiter/blocked-cache.ts', BLOCKED_CACHE_DEFAULTS],
  ['PenaltyOptions', 'algorithms/penalty.ts', PENALTY_DEFAULTS],
  ['SlowDownOptions<Args extends unknown[], Res = Args[1]>', 'slow-down/options.ts', SLOW_DOWN_DEFAULTS],
  ['WaitOptions', 'limiter/wait.ts', WAIT_DEFAULTS],
  ['DelayOptions', 'http/options.ts', DELAY_DEFAULTS],
]

/** The `@default` value written before each option of `interfaceName` in `file`, as source text. */
function documentedDefaults(file: string, interfaceName: string): Map<string, string> {
  const source = readFileSync(join(import.meta.dirname, '..', 'src', file), 'utf8')
  const start = source.indexOf(`export interface ${interfaceName} {`)
  expect(start, `${interfaceName} in ${file}`).toBeGreaterThanOrEqual(0)
  const body = source.slice(start, source.indexOf('\n}', start))
  const defaults = new Map<string, string>()
  for (const [, doc, name] of body.matchAll(/\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*(?:readonly\s+)?(\w+)\??:/g)) {
    const tag = /@default\s+(\S+)/.exec(doc!)
    if (tag) defaults.set(name!, tag[1]!)
  }
  return defaults
}

/** Source text of a default as the tags write it: '1m' quoted, 100_000 with its separators dropped. */
const asSource = (value: unknown) => (typeof value === 'string' ? `'${value}'` : String(value))

describe('defaults, one place per class (issue 20)', () => {
  it.each(CLASSES)(
    '%s: each default in the constant is the one its @default tag documents',
    (name, file, defaults) => {
      const documented = documentedDefaults(file, name)
      for (const [option, value] of Object.entries(defaults)) {
        expect(documented.get(option)?.replaceAll('_', ''), `${name}.${option}`).toBe(asSource(value))
      }
    },
  )
})
