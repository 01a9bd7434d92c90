/**
 * The RedisStore suite one client family runs, standalone and on a Cluster: the shared store conformance suite,
 * then what only Redis has (TTLs, exact admission under concurrency, hostile identifiers, one command per
 * decision, scripts reloaded on the node that lacks them). Each client's test file calls `describeRedisStore`.
 */
import {
  type Decision,
  fixedWindow,
  gcra,
  RateLimiter,
  type RedisClient,
  RedisStore,
  type Rule,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { describeStoreConformance } from '@ratewindow/testing'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from './connections.js'
import { redisEnvironment, uniquePrefix } from './redis.js'
import { type Address, type ClientFamily, connect } from './redis-clients.js'
import { describeRedisOverrides } from './redis-overrides-suite.js'
import { RedisClusterProcesses, RedisServer } from './redis-server.js'

/** One rule per algorithm, all over an hour: distinct names, so that they fit in one limiter. */
export const ALGORITHMS: [string, (limit: number) => Rule][] = [
  ['fixed-window', (limit) => fixedWindow({ limit, window: '1h', name: 'fixed' })],
  ['sliding-window-log', (limit) => slidingWindowLog({ limit, window: '1h', name: 'log' })],
  ['sliding-window-counter', (limit) => slidingWindowCounter({ limit, window: '1h', name: 'counter' })],
  [
    'token-bucket',
    (limit) => tokenBucket({ capacity: limit, refillRate: 1, interval: '1h', name: 'bucket' }),
  ],
  ['gcra', (limit) => gcra({ limit: 1, window: '1h', burst: limit, name: 'gcra' })],
]

// Written in redis.ts, which loads only ioredis: a test that needs a prefix alone imports it from there.
export { uniquePrefix }

const admins = new Map<number, Redis>()
/** An ioredis connection to one server, to inspect what the client under test did. */
export function admin(port: number): Redis {
  let client = admins.get(port)
  if (client === undefined) {
    client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    admins.set(port, client)
  }
  return client
}
afterAll(() => {
  for (const client of admins.values()) client.disconnect()
  admins.clear()
})

/** EVALSHA and EVAL calls on one server since its last CONFIG RESETSTAT. */
export async function scriptCalls(port: number): Promise<{ evalsha: number; eval: number; time: number }> {
  const stats = await admin(port).info('commandstats')
  const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
  return { evalsha: calls('evalsha'), eval: calls('eval'), time: calls('time') }
}

/** The port of the server holding `key`: the standalone server, or the Cluster master owning its slot. */
async function ownerOf(target: Topology, key: string): Promise<number> {
  if (typeof target.address === 'number') return target.address
  const slot = Number(await admin(target.ports[0]!).cluster('KEYSLOT', key))
  const ranges = await admin(target.ports[0]!).cluster('SLOTS')
  const range = ranges.find(([from, to]) => slot >= from && slot <= to)
  if (!range?.[2]) throw new Error(`no node serves slot ${slot}`)
  return range[2][1]
}

interface Topology {
  name: 'standalone' | 'Cluster'
  /** What `connect` takes: a port, or the Cluster's seed nodes. */
  address: number | readonly Address[]
  /** Every server (every master of a Cluster). */
  ports: number[]
}

export interface RedisStoreSuiteOptions {
  /** Property runs per conformance property, standalone and on the Cluster. */
  numRuns: { standalone: number; cluster: number }
}

export function describeRedisStore(family: ClientFamily, options: RedisStoreSuiteOptions): void {
  const shared = (): Topology[] => {
    const { standalonePort, clusterNodes } = redisEnvironment()
    return [
      { name: 'standalone', address: standalonePort, ports: [standalonePort] },
      { name: 'Cluster', address: clusterNodes, ports: clusterNodes.map((node) => node.port) },
    ]
  }
  for (const name of ['standalone', 'Cluster'] as const) {
    const topology = () => shared().find((candidate) => candidate.name === name)!
    let client: Promise<RedisClient> | undefined
    describeStoreConformance(
      { describe, it, expect },
      {
        name: `RedisStore with ${family.name} (${name})`,
        createStore: async (clock) => {
          client ??= connect(family, topology().address)
          return new RedisStore({ client: await client, clock: clock.read })
        },
        // A process of its own: a client of its own on the same servers.
        createProcess: async (clock) =>
          new RedisStore({ client: await connect(family, topology().address), clock: clock.read }),
        numRuns: name === 'standalone' ? options.numRuns.standalone : options.numRuns.cluster,
        reserves: true,
        overrides: true,
        quotas: true,
        plans: true,
      },
    )
    describeRedisOnly(family, name, topology)
    describeRedisOverrides({
      family,
      name,
      ports: () => topology().ports,
      connect: () => connect(family, topology().address),
      prefix: uniquePrefix,
      rules: () => ALGORITHMS.map(([, make]) => make(1_000)),
    })
  }
  describeScriptReloads(family)
}

function describeRedisOnly(family: ClientFamily, name: string, topology: () => Topology): void {
  const connected = () => connect(family, topology().address)

  /** All keys under `pattern`, on every server of the topology. */
  async function keysMatching(pattern: string): Promise<string[]> {
    const keys: string[] = []
    for (const port of topology().ports) keys.push(...(await admin(port).keys(pattern)))
    return keys
  }
  async function pttl(key: string): Promise<number> {
    return admin(await ownerOf(topology(), key)).pttl(key)
  }

  describe(`RedisStore with ${family.name} (${name}): Redis only`, () => {
    it.each(ALGORITHMS)(
      '%s: 2,000 concurrent requests over 8 connections admit exactly the limit',
      async (_, make) => {
        const rule = make(500)
        const prefix = uniquePrefix()
        const now = 1_700_000_000_000
        const clients = await Promise.all(Array.from({ length: 8 }, connected))
        const limiters = clients.map(
          (client) =>
            new RateLimiter({
              rules: rule,
              prefix,
              store: new RedisStore({ client, clock: () => now }),
              timeout: '30s',
            }),
        )
        const results = await Promise.all(
          Array.from({ length: 2_000 }, (_, i) => limiters[i % 8]!.limit('hot')),
        )
        // Exactness is the point, not latency: the generous timeout keeps the failure policy out of it.
        expect(results.filter((result) => result.source !== 'store')).toEqual([])
        expect(results.filter((result) => result.allowed)).toHaveLength(500)
        expect(results.filter((result) => !result.allowed).every((result) => result.retryAfter > 0)).toBe(
          true,
        )
      },
    )

    it('every key written has a TTL after a run of every algorithm and several rules', async () => {
      const prefix = uniquePrefix()
      const store = new RedisStore({ client: await connected() })
      const limiter = new RateLimiter({ rules: ALGORITHMS.map(([, make]) => make(3)), store, prefix })
      for (let i = 0; i < 40; i++) {
        const result = await limiter.limit(`client-${i % 7}`)
        if (i % 5 === 0) await limiter.refund(result)
        await limiter.peek(`client-${i % 9}`)
      }
      const keys = await keysMatching(`${prefix}*`)
      expect(keys.length).toBeGreaterThan(0)
      for (const key of keys) expect(await pttl(key)).toBeGreaterThan(0)
    })

    it('repairs a key found without a TTL, on the allowed and the denied path', async () => {
      const store = new RedisStore({ client: await connected() })
      const rule = fixedWindow({ limit: 2, window: '1h' })
      const prefix = uniquePrefix()
      const limiter = new RateLimiter({ rules: rule, store, prefix })
      const window = Math.floor(Date.now() / 3_600_000)
      for (const [identifier, count, allowed] of [
        ['below', 1, true],
        ['at-limit', 2, false],
      ] as const) {
        const key = store.keyFor(limiter.namespace, identifier, rule)
        const owner = admin(await ownerOf(topology(), key))
        await owner.set(key, `${window}:${count}`) // no TTL
        expect(await owner.pttl(key)).toBe(-1)
        expect((await limiter.limit(identifier)).allowed).toBe(allowed)
        const ttl = await owner.pttl(key)
        expect(ttl).toBeGreaterThan(0)
        expect(ttl).toBeLessThanOrEqual(3_600_000)
      }
    })

    it('hostile identifiers are safe: bounded keys, no stray braces, no shared buckets', async () => {
      const prefix = uniquePrefix()
      const store = new RedisStore({ client: await connected() })
      const rules = [
        fixedWindow({ limit: 1, window: '1h' }),
        slidingWindowLog({ limit: 1, window: '1h', name: 'log' }),
      ]
      const limiter = new RateLimiter({ rules, store, prefix })
      const identifiers = [
        'x'.repeat(10_240),
        'a\nb',
        '{',
        '}',
        '',
        '{tag}',
        '}{',
        'déjà vu 💥',
        '\u0000',
        ' ',
      ]
      for (const id of identifiers) expect((await limiter.limit(id)).allowed).toBe(true)
      for (const id of identifiers) expect((await limiter.limit(id)).allowed).toBe(false)
      const keys = await keysMatching(`${prefix}*`)
      expect(keys).toHaveLength(identifiers.length * rules.length)
      for (const key of keys) {
        expect(key.length).toBeLessThan(80)
        expect(key.match(/[{}]/g)).toEqual(['{', '}'])
      }
    })

    it('reset deletes every rule key of the client', async () => {
      const prefix = uniquePrefix()
      const store = new RedisStore({ client: await connected() })
      const limiter = new RateLimiter({ rules: ALGORITHMS.map(([, make]) => make(2)), store, prefix })
      await limiter.limit('gone')
      await limiter.limit('kept')
      expect(await keysMatching(`${prefix}*`)).toHaveLength(2 * ALGORITHMS.length)
      await limiter.reset('gone')
      expect(await keysMatching(`${prefix}*`)).toHaveLength(ALGORITHMS.length)
    })
  })
}

/**
 * Counted on servers of this file's own: one EVALSHA per decision, and a script the node lacks (flushed,
 * restarted, new) loaded on that node by the next decision, with one EVAL, and never retried otherwise.
 */
function describeScriptReloads(family: ClientFamily): void {
  describe(`RedisStore with ${family.name}: one command per decision, scripts reloaded where missing`, () => {
    let server: RedisServer
    let cluster: RedisClusterProcesses
    beforeAll(async () => {
      ;[server, cluster] = await Promise.all([RedisServer.start(), RedisClusterProcesses.start(3)])
    })
    afterAll(async () => {
      await Promise.all([server?.stop(), cluster?.stop()])
    })
    const topologies = (): Topology[] => [
      { name: 'standalone', address: server.port, ports: [server.port] },
      { name: 'Cluster', address: cluster.startupNodes, ports: cluster.nodes.map((node) => node.port) },
    ]
    const total = async (ports: number[]) => {
      const counts = await Promise.all(ports.map(scriptCalls))
      return {
        evalsha: counts.reduce((sum, count) => sum + count.evalsha, 0),
        eval: counts.reduce((sum, count) => sum + count.eval, 0),
      }
    }
    const resetStats = (ports: number[]) => Promise.all(ports.map((port) => admin(port).config('RESETSTAT')))

    for (const name of ['standalone', 'Cluster'] as const) {
      const topology = () => topologies().find((candidate) => candidate.name === name)!

      it(`${name}: each decision is one EVALSHA, whatever the number of rules`, async () => {
        const { address, ports } = topology()
        const limiter = new RateLimiter({
          rules: ALGORITHMS.map(([, make]) => make(1_000)),
          store: new RedisStore({ client: await connect(family, address) }),
          prefix: uniquePrefix(),
        })
        for (let i = 0; i < 10; i++) await limiter.limit(`warm-up-${i}`) // loads the script where it is missing
        await resetStats(ports)
        for (let i = 0; i < 100; i++) await limiter.limit(`k${i % 10}`)
        expect(await total(ports)).toEqual({ evalsha: 100, eval: 0 })
        // commandstats counts commands run inside scripts too: one TIME each, server time by default.
        const times = await Promise.all(ports.map(async (port) => (await scriptCalls(port)).time))
        expect(times.reduce((sum, time) => sum + time, 0)).toBe(100)
      })

      it(`${name}: after SCRIPT FLUSH on every node, each node loads the script itself, once`, async () => {
        const { address, ports } = topology()
        const limiter = new RateLimiter({
          rules: slidingWindowCounter({ limit: 10, window: '1h' }),
          store: new RedisStore({ client: await connect(family, address) }),
          prefix: uniquePrefix(),
        })
        const store = limiter.store as RedisStore
        // Identifiers whose keys land on every node (all on the one server when standalone).
        const byNode = new Map<number, string>()
        for (let i = 0; byNode.size < ports.length; i++) {
          const owner = await ownerOf(
            topology(),
            store.keyFor(limiter.namespace, `id-${i}`, limiter.rules[0]!),
          )
          if (!byNode.has(owner)) byNode.set(owner, `id-${i}`)
        }
        for (const identifier of byNode.values()) await limiter.limit(identifier)
        await Promise.all(ports.map((port) => admin(port).script('FLUSH')))
        await resetStats(ports)
        for (let round = 0; round < 3; round++) {
          for (const identifier of byNode.values())
            expect((await limiter.limit(identifier)).allowed).toBe(true)
        }
        for (const port of ports) expect(await scriptCalls(port)).toMatchObject({ evalsha: 3, eval: 1 })
      })
    }

    it('standalone: after a restart of the server, the next decision reloads the script and counts from scratch', async () => {
      const store = new RedisStore({ client: await connect(family, server.port) })
      const request = {
        prefix: uniquePrefix(),
        key: 'k',
        rules: [fixedWindow({ limit: 5, window: '1h' })],
        cost: 1,
      }
      expect((await store.consume(request)).outcomes[0]!.remaining).toBe(4)
      await server.kill()
      await server.restart() // no persistence: keys and scripts are gone
      let decision: Decision | undefined
      await until(
        async () => {
          decision = await store.consume(request).catch(() => undefined)
          return decision !== undefined
        },
        'the client reconnects to the restarted server and a decision succeeds',
        { within: 10_000, every: 25 },
      )
      expect(decision).toMatchObject({ allowed: true, outcomes: [{ remaining: 4 }] })
      expect(await scriptCalls(server.port)).toMatchObject({ eval: 1 })
    })

    it('a script that timed out is never sent again: the request is counted once, late', async () => {
      const errors: unknown[] = []
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 5, window: '1h' }),
        store: new RedisStore({ client: await connect(family, server.port, 100) }),
        prefix: uniquePrefix(),
        timeout: '100ms',
        onError: (error) => errors.push(error),
      })
      await limiter.limit('warm-up') // the script is loaded
      await admin(server.port).config('RESETSTAT')
      await admin(server.port).client('PAUSE', 5_000, 'WRITE') // the server holds scripts until UNPAUSE
      expect((await limiter.limit('slow')).source).toBe('policy') // the client's or the limiter's timeout
      await admin(server.port).client('UNPAUSE')
      expect(errors).toHaveLength(1)
      // Sent on the same connection, the peek runs after the late script: it sees it counted once.
      expect(await limiter.peek('slow', { cost: 0 })).toMatchObject({ source: 'store', remaining: 4 })
      expect(await scriptCalls(server.port)).toMatchObject({ evalsha: 2, eval: 0 })
    })

    it('Cluster: after the key slot moves to a new node, the next decision loads the script there', async () => {
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 5, window: '1h' }),
        store: new RedisStore({ client: await connect(family, cluster.startupNodes) }),
        prefix: uniquePrefix(),
      })
      const store = limiter.store as RedisStore
      const key = store.keyFor(limiter.namespace, 'mover', limiter.rules[0]!)
      for (let i = 0; i < 2; i++) await limiter.limit('mover')
      const slot = Number(await admin(cluster.nodes[0]!.port).cluster('KEYSLOT', key))
      const fresh = await cluster.addNode()
      await cluster.moveSlot(slot, fresh) // keys move along, the script does not
      expect(await cluster.slotOwner(slot)).toBe(fresh.port)
      expect(await limiter.limit('mover')).toMatchObject({ allowed: true, remaining: 2 })
      expect(await limiter.limit('mover')).toMatchObject({ allowed: true, remaining: 1 })
      // The script was loaded there by an EVAL: after NOSCRIPT (the client still sent the first call to the old
      // node, which redirected it), or at once where the client already knew the new owner; and it ran twice.
      const calls = await scriptCalls(fresh.port)
      expect(calls.eval).toBeGreaterThanOrEqual(1)
      expect(calls.time).toBe(2)
    })
  })
}
