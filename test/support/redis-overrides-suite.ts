/**
 * Overrides on RedisStore beyond the conformance section (issue 34), for one client family, standalone and on the
 * Cluster: the record is read by the decision script itself (MONITOR sees one EVALSHA per decision or per group,
 * and nothing else naming the client's keys), and processes that share a Redis see a change made by another at
 * their next decision.
 */

import {
  fixedWindow,
  gcra,
  type LimitOverride,
  MemoryStore,
  RateLimiter,
  type RedisClient,
  RedisStore,
  type Rule,
  tokenBucket,
} from '@ratewindow/core'
import { storedHash } from '@ratewindow/core/stored'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it, onTestFinished } from 'vitest'
import { until } from './connections.js'
import { monitorOn } from './monitor.js'
import { forgetPrefix } from './redis.js'
import type { ClientFamily } from './redis-clients.js'

export interface OverridesSuiteContext {
  family: ClientFamily
  name: 'standalone' | 'Cluster'
  /** Every server (every master of a Cluster). */
  ports: () => number[]
  /** A new connection (a process of its own). */
  connect: () => Promise<RedisClient>
  /** A fresh key prefix. */
  prefix: () => string
  rules: () => Rule[]
}

/** The commands MONITOR sees from clients (not from scripts) naming a key under `prefix`, on every port. */
async function watch(ports: number[], prefix: string) {
  const seen: string[][] = []
  const markers = new Set<string>()
  const sockets = await Promise.all(
    ports.map((port) =>
      monitorOn(port, (source, args) => {
        if (args[0]?.toLowerCase() === 'echo' && args[1]?.startsWith(prefix)) markers.add(args[1])
        else if (source !== 'lua' && args.some((arg) => arg.includes(prefix))) seen.push(args)
      }),
    ),
  )
  const admins = ports.map((port) => new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 }))
  let rounds = 0
  return {
    seen,
    /** Waits until every server's MONITOR stream has passed what was sent before (a marker ECHOed on each). */
    async settle(): Promise<void> {
      const round = rounds++
      await Promise.all(admins.map((admin, i) => admin.echo(`${prefix}marker-${round}-${i}`)))
      await until(
        () => admins.every((_, i) => markers.has(`${prefix}marker-${round}-${i}`)),
        'every MONITOR stream showed its marker',
      )
    },
    close(): void {
      for (const socket of sockets) socket.destroy()
      for (const admin of admins) admin.disconnect()
    },
  }
}

export function describeRedisOverrides(context: OverridesSuiteContext): void {
  const { family, name, connect, prefix } = context
  const closing: (() => void)[] = []
  afterAll(() => {
    for (const close of closing) close()
  })
  describe(`RedisStore with ${family.name} (${name}): overrides read in the deciding script`, () => {
    it('MONITOR: each decision is one EVALSHA, single and grouped, with an override, a block or none', async () => {
      const store = new RedisStore({ client: await connect() })
      const limiter = new RateLimiter({ rules: context.rules(), store, prefix: prefix(), overrides: true })
      await limiter.overrides.set('raised', { limit: 5 })
      await limiter.overrides.block('blocked', { for: '1h', reason: 'test' })
      // The single and grouped scripts loaded on every node that serves these keys.
      for (const key of ['raised', 'blocked', 'plain']) await limiter.limit(key)
      await Promise.all(
        Array.from({ length: 30 }, (_, i) => limiter.limit(['raised', 'blocked', 'plain'][i % 3]!)),
      )
      const monitor = await watch(context.ports(), limiter.prefix)
      closing.push(monitor.close)
      await monitor.settle()
      monitor.seen.length = 0

      for (let i = 0; i < 30; i++) await limiter.limit(['raised', 'blocked', 'plain'][i % 3]!)
      await monitor.settle()
      expect(monitor.seen.map((args) => args[0]!.toLowerCase())).toEqual(Array(30).fill('evalsha'))

      monitor.seen.length = 0
      const before = store.groupStats.calls
      const results = await Promise.all(
        Array.from({ length: 300 }, (_, i) => limiter.limit(['raised', 'blocked', 'plain'][i % 3]!)),
      )
      await monitor.settle()
      const calls = store.groupStats.calls - before
      expect(monitor.seen.map((args) => args[0]!.toLowerCase())).toEqual(Array(calls).fill('evalsha'))
      expect(calls).toBeLessThan(300)
      expect(results.filter((result) => result.manualBlock !== undefined)).toHaveLength(100)
      expect(results.find((result) => result.overridden)?.limit).toBeGreaterThan(1)
    })

    it('rolling deploy: the script with overrides reads the state the scripts without them wrote, and leaves it readable to them', async () => {
      const shared = prefix()
      const client = await connect()
      const limiter = (overrides: boolean) =>
        new RateLimiter({
          rules: [
            gcra({ limit: 10, window: '1h', name: 'gcra' }),
            tokenBucket({ capacity: 10, refillRate: 10, interval: '1h', name: 'bucket' }),
            fixedWindow({ limit: 10, window: '1h', name: 'fixed' }),
          ],
          store: new RedisStore({ client }),
          prefix: shared,
          name: 'api',
          overrides,
        })
      const before = limiter(false)
      const after = limiter(true)
      for (let i = 0; i < 6; i++) expect((await before.limit('k')).allowed).toBe(true)
      // The new version reads the old one's state as it is: 6 of 10 used in every rule.
      expect((await after.overrides.inspect('k')).rules.map((rule) => rule.used)).toEqual([6, 6, 6])
      await after.overrides.set('k', { limit: 20 })
      let admitted = 0
      for (let i = 0; i < 20; i++) if ((await after.limit('k')).allowed) admitted++
      expect(admitted).toBe(14)
      // Once the override is gone, the next decision with overrides writes the coded format again, which the
      // script without overrides reads: 20 used of 10, nothing admitted.
      await after.overrides.delete('k')
      expect((await after.limit('k')).allowed).toBe(false)
      expect(await before.limit('k')).toMatchObject({ allowed: false, remaining: 0 })
    })

    it('GCRA and token bucket states converted on the server decide as MemoryStore converts them', async () => {
      let now = 1_700_000_000_000
      const rules = () => [
        gcra({ limit: 7, window: '1m', burst: 13, name: 'gcra' }),
        tokenBucket({ capacity: 9, refillRate: 4, interval: '10s', name: 'bucket' }),
      ]
      const made = (store: RedisStore | MemoryStore) =>
        new RateLimiter({ rules: rules(), store, prefix: prefix(), name: 'api', overrides: true })
      const redis = made(new RedisStore({ client: await connect(), clock: () => now }))
      const memory = made(new MemoryStore({ clock: () => now }))
      const steps: [number, LimitOverride | undefined][] = [
        [5, { limit: 3 }],
        [4, { rules: { gcra: { limit: 19, burst: 5 }, bucket: { limit: 1, burst: 30 } } }],
        [7, undefined],
        [3, { limit: 50 }],
        [20, { limit: 2, burst: 2 }],
        [6, undefined],
      ]
      const trace = async (limiter: RateLimiter, key: string) => {
        const result = await limiter.limit(key)
        return [result.allowed, ...result.rules.map((rule) => [rule.rule.limit, rule.remaining, rule.reset])]
      }
      for (const [index, [decisions, override]] of steps.entries()) {
        for (let i = 0; i < decisions; i++) {
          expect(await trace(redis, 'k'), `step ${index}, decision ${i}`).toEqual(await trace(memory, 'k'))
          now += 1_337
        }
        for (const limiter of [redis, memory]) {
          if (override === undefined) await limiter.overrides.delete('k')
          else await limiter.overrides.set('k', override)
        }
        now += 2_500
      }
    })

    it('two processes on one Redis see an override and a block set by a third at their next decision', async () => {
      const shared = prefix()
      const process = async () =>
        new RateLimiter({
          rules: context.rules(),
          store: new RedisStore({ client: await connect() }),
          prefix: shared,
          name: 'api',
          overrides: true,
        })
      const [first, second, operator] = await Promise.all([process(), process(), process()])
      const coded = (await first.limit('k')).limit
      expect((await second.limit('k')).overridden).toBeUndefined()
      await operator.overrides.set('k', { limit: coded * 3 })
      for (const limiter of [first, second])
        expect(await limiter.limit('k')).toMatchObject({ overridden: true, limit: coded * 3 })
      await operator.overrides.block('k', { for: '1m', reason: 'incident' })
      for (const limiter of [first, second])
        expect(await limiter.limit('k')).toMatchObject({
          allowed: false,
          manualBlock: { reason: 'incident' },
        })
      await operator.overrides.unblock('k')
      await operator.overrides.delete('k')
      for (const limiter of [first, second])
        expect(await limiter.limit('k')).toMatchObject({ allowed: true, limit: coded })
    })

    it('overrides.top: the 10 most limited of 1,000 keys, by a scan on every master; raw where a record holds it', async () => {
      const storePrefix = prefix()
      onTestFinished(() => forgetPrefix(context.ports(), storePrefix))
      const store = new RedisStore({ client: await connect(), prefix: storePrefix })
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 100, window: '1h' }),
        store,
        prefix: prefix(),
        overrides: true,
        // A scan reads many keys; on a loaded machine a Cluster read may pass the default 250 ms (not what is tested).
        timeout: '5s',
      })
      const keys = Array.from({ length: 1000 }, (_, i) => `client-${i}`)
      await Promise.all(keys.map((key) => limiter.limit(key)))
      const most = keys.filter((_, i) => i % 97 === 5).slice(0, 10)
      for (const [i, key] of most.entries()) await limiter.overrides.take(key, 20 + i)
      await limiter.overrides.block('client-500', { for: '1h' })

      const top = await limiter.overrides.top({ count: 11 })
      expect(top.keys.map((row) => row.key)).toEqual([
        'client-500',
        ...most.map((key) => storedHash(key)).reverse(),
      ])
      expect(top.keys[1]).toMatchObject({
        hashed: true,
        rule: '100-per-1h',
        used: 30,
        limit: 100,
        remaining: 70,
      })
      expect(top.keys[0]).toMatchObject({ hashed: false, blocked: true })
      // 1,000 counters and one override record.
      expect(top).toMatchObject({ scanned: 1001, complete: true })
      expect(await limiter.overrides.top({ scan: 300 })).toMatchObject({ scanned: 300, complete: false })
    })
  })
}
