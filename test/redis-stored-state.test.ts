/**
 * RedisStore's keys read back without the limiter's code (`decodeStoredKey`, `decodeNamespace`, `inspectStored`):
 * what `@ratewindow/cli` finds by scanning decodes to the limiter that wrote it, and reads as its `inspect` does.
 */
import {
  fixedWindow,
  gcra,
  RateLimiter,
  RedisStore,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import {
  decodeNamespace,
  decodeStoredKey,
  inspectStored,
  storedHash,
  storedKeyPattern,
  storedSlot,
} from '@ratewindow/core/stored'
import { describe, expect, it } from 'vitest'
import { clusterClient, standaloneClient } from './support/redis.js'
import { uniquePrefix } from './support/redis-store-suite.js'

const RULE_SETS: [string, Rule[]][] = [
  ['fixed window', [fixedWindow({ limit: 5, window: '1m' })]],
  ['sliding window log', [slidingWindowLog({ limit: 5, window: '10s' })]],
  [
    'sliding window counter + fixed window',
    [slidingWindowCounter({ limit: 5, window: '1m' }), fixedWindow({ limit: 50, window: '1h' })],
  ],
  ['token bucket', [tokenBucket({ capacity: 5, refillRate: 1, interval: '1s' })]],
  ['gcra', [gcra({ limit: 5, window: '1m', burst: 7 })]],
]

describe('a namespace decodes to the limiter that wrote it', () => {
  for (const [name, rules] of RULE_SETS) {
    it(`${name}: prefix and rules (storage ids and limits)`, () => {
      const limiter = new RateLimiter({
        rules,
        store: new RedisStore({ client: standaloneClient() }),
        prefix: 'app:rl',
      })
      const decoded = decodeNamespace(limiter.namespace)!
      expect(decoded).toMatchObject({ prefix: 'app:rl', kind: 'counters', routeScoped: false })
      expect(decoded.rules!.map((rule) => [rule.id, rule.limit, rule.algorithm])).toEqual(
        rules.map((rule) => [rule.id, rule.limit, rule.algorithm]),
      )
    })
  }

  it('a group, an override scope, a long signature: what the name tells, no more', () => {
    const store = new RedisStore({ client: standaloneClient() })
    const grouped = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store,
      group: 'login',
      overrides: true,
    })
    expect(decodeNamespace(grouped.namespace)).toEqual({
      namespace: 'rw:g=login:',
      prefix: 'rw',
      kind: 'counters',
      group: 'login',
      routeScoped: false,
    })
    expect(decodeNamespace(grouped.overrides.scope!)).toMatchObject({ kind: 'overrides', group: 'login' })
    const named = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store,
      name: 'api',
      overrides: true,
    })
    expect(decodeNamespace(named.overrides.scope!)).toMatchObject({ kind: 'overrides', prefix: 'rw' })
    const rules = [1, 2, 3, 4, 5, 6, 7].map((n) => fixedWindow({ limit: n, window: n * 100_000 }))
    const long = new RateLimiter({ rules, store, prefix: 'long' })
    const decoded = decodeNamespace(long.namespace)!
    expect(decoded).toMatchObject({ prefix: 'long', kind: 'counters' })
    expect(decoded.rules).toBeUndefined()
    expect(decodeNamespace('not a namespace')).toBeUndefined()
  })
})

describe('keys found by a scan read as the limiter reads them', () => {
  for (const [topology, client] of [
    ['standalone', () => standaloneClient()],
    ['Cluster', () => clusterClient()],
  ] as const) {
    it(`${topology}: every key decodes; inspectStored equals inspect, by hash; one hash tag, one slot`, async () => {
      const redis = client()
      const storePrefix = uniquePrefix()
      const store = new RedisStore({ client: redis, prefix: storePrefix })
      const rules = [slidingWindowCounter({ limit: 5, window: '1m' }), gcra({ limit: 10, window: '1m' })]
      const limiter = new RateLimiter({ rules, store, overrides: true, name: 'api' })
      for (let i = 0; i < 3; i++) await limiter.limit('customer:42')
      await limiter.overrides.set('customer:42', { limit: 8 })
      const hash = storedHash('customer:42')
      const keys = [
        ...rules.map((rule) => store.keyFor(limiter.namespace, 'customer:42', rule)),
        store.recordKeyFor(limiter.overrides.scope!, 'customer:42'),
      ]
      const decoded = keys.map((key) => decodeStoredKey(key, storePrefix))
      expect(decoded.map((each) => [each?.namespace, each?.hash, each?.part])).toEqual([
        [limiter.namespace, hash, { kind: 'rule', ruleId: rules[0]!.id }],
        [limiter.namespace, hash, { kind: 'rule', ruleId: rules[1]!.id }],
        [limiter.overrides.scope, hash, { kind: 'override' }],
      ])
      expect(new Set(keys.map((key) => storedSlot(decodeStoredKey(key, storePrefix)!.hash))).size).toBe(1)
      expect(decodeStoredKey('someone:else', storePrefix)).toBeUndefined()
      const decodedRules = decodeNamespace(limiter.namespace)!.rules!
      const stored = await inspectStored(store, {
        namespace: limiter.namespace,
        hash,
        rules: decodedRules,
        overrides: limiter.overrides.scope!,
        key: 'customer:42',
      })
      const inspected = await limiter.overrides.inspect('customer:42')
      // Time runs between the two reads: every field but `at` and `reset` is equal.
      const timeless = ({ at: _, rules, ...rest }: typeof stored) => ({
        ...rest,
        rules: rules.map(({ reset: _r, ...rule }) => rule),
      })
      expect(timeless(stored)).toEqual(timeless(inspected))
      expect(stored.rules[0]).toMatchObject({ used: 3, limit: 8, overridden: true })
      if (topology === 'standalone') {
        // The whole keyspace, page after page (other test files share this server).
        const found: string[] = []
        let cursor = '0'
        do {
          const [next, page] = await (redis as ReturnType<typeof standaloneClient>).scan(
            cursor,
            'MATCH',
            storedKeyPattern(storePrefix, hash),
            'COUNT',
            1000,
          )
          found.push(...page)
          cursor = next
        } while (cursor !== '0')
        expect(found.sort()).toEqual([...keys].sort())
      }
    })
  }
})
