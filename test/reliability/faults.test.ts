/**
 * Faults stay where they are, on real redis-server processes: a Cluster master (no replica) killed under load
 * sends only its own keys to the failure policy; a key of the wrong type sends only itself; a stalled server
 * does not charge, once it answers, the requests that `deny` refused; a hung fallback and a throwing `onError`
 * cannot hang or crash a request, through each adapter over HTTP.
 */
import { once } from 'node:events'
import {
  fixedWindow,
  RateLimiter,
  type RateLimitResult,
  RedisStore,
  type Rule,
  slidingWindowCounter,
} from '@ratewindow/core'
import { Cluster, Redis } from 'ioredis'
import request from 'supertest'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_MAX_FLIGHTS } from '../../packages/core/src/stores/redis/groups.js'
import { FRAMEWORKS } from '../http/harness.js'
import { until } from '../support/connections.js'
import { recorder } from '../support/recorder.js'
import { RedisClusterProcesses, RedisServer } from '../support/redis-server.js'
import { unhandledRejections } from '../support/unhandled.js'

const unhandled = unhandledRejections()
afterAll(() => {
  expect(unhandled).toEqual([])
})

/** Client settings from docs/operations.md: fail fast, never resend a script. */
const FAIL_FAST = { maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false, connectTimeout: 500 }

function standaloneClient(port: number): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    ...FAIL_FAST,
    enableOfflineQueue: false,
    retryStrategy: () => 50,
  })
  client.on('error', () => {}) // expected while a server is stopped; the limiter reports its own failures
  return client
}

/** SIGSTOP / SIGCONT of a server: it keeps its connections but answers nothing until continued. */
async function pid(server: RedisServer): Promise<number> {
  return Number(/process_id:(\d+)/.exec(await server.cli('info', 'server'))![1])
}

describe('a Cluster master dies (3 masters, no replica) under load', () => {
  let cluster: RedisClusterProcesses
  let client: Cluster

  beforeAll(async () => {
    cluster = await RedisClusterProcesses.start(3, 0)
    client = new Cluster(cluster.startupNodes, {
      redisOptions: FAIL_FAST,
      enableOfflineQueue: false,
      clusterRetryStrategy: () => 100,
      slotsRefreshTimeout: 500,
      slotsRefreshInterval: 1_000,
    })
    client.on('error', () => {})
    await once(client, 'ready')
  })
  afterAll(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  it('clients on the healthy masters keep exact limits; only the dead shard gets the policy', async () => {
    const LIMIT = 40
    const ROUNDS = 70
    const KILL_AFTER = 15
    const PER_MASTER = 6 // enough clients that the dead shard's failures arrive in bursts
    const store = new RedisStore({ client })
    const rules: Rule[] = [
      fixedWindow({ limit: LIMIT, window: '1h' }),
      slidingWindowCounter({ limit: 1_000, window: '1h' }),
    ]
    const masters = await slotOwners(client)
    const victim = cluster.nodes[0]!.port
    expect(new Set(masters.values())).toEqual(new Set(cluster.nodes.map((node) => node.port)))

    const setups = []
    for (const policy of ['allow', 'deny'] as const) {
      const { errors, onError } = recorder()
      const limiter = new RateLimiter({
        rules,
        store,
        prefix: `faults-${policy}`,
        onStoreError: policy,
        timeout: '1s', // generous: a slow healthy answer on a busy machine must not count as a fault
        onError,
      })
      // PER_MASTER clients per master, found by asking the Cluster which slot each key is in.
      const keys = new Map<number, string[]>()
      for (let i = 0; [...keys.values()].flat().length < 3 * PER_MASTER; i++) {
        const key = `client-${i}`
        const slot = Number(await client.cluster('KEYSLOT', store.keyFor(limiter.namespace, key, rules[0]!)))
        const owner = owningPort(masters, slot)
        const group = keys.get(owner) ?? []
        if (group.length < PER_MASTER) keys.set(owner, [...group, key])
      }
      setups.push({ policy, limiter, keys, errors, results: new Map<string, RateLimitResult[]>() })
    }

    for (let round = 0; round < ROUNDS; round++) {
      if (round === KILL_AFTER) await cluster.nodes[0]!.kill('SIGKILL')
      await Promise.all(
        setups.flatMap(({ limiter, keys, results }) =>
          [...keys.values()].flat().map(async (key) => {
            const result = await limiter.limit(key)
            results.set(key, [...(results.get(key) ?? []), result])
          }),
        ),
      )
    }

    for (const { policy, keys, results, errors } of setups) {
      for (const [port, group] of keys) {
        for (const key of group) {
          const answers = results.get(key)!
          const admitted = answers.filter((result) => result.allowed).length
          const byPolicy = answers.filter((result) => result.source === 'policy').length
          if (port !== victim) {
            // Healthy shard: every answer from Redis, exactly the limit admitted.
            expect({ policy, key, admitted, byPolicy }).toEqual({ policy, key, admitted: LIMIT, byPolicy: 0 })
          } else {
            // Dead shard: answered by the policy from the kill on (fail open admits, fail closed refuses).
            const after = answers.slice(KILL_AFTER)
            expect(after.every((result) => result.source === 'policy')).toBe(true)
            expect(after.every((result) => result.allowed === (policy === 'allow'))).toBe(true)
          }
        }
      }
      expect(errors.length).toBeGreaterThan(0)
      // The dead shard's breaker opened: far fewer failures than requests to it.
      expect(errors.length).toBeLessThan(((ROUNDS - KILL_AFTER) * PER_MASTER) / 4)
    }
    // The failure scope of each client is the master the Cluster itself names for the client's slot.
    for (const { limiter, keys } of setups) {
      for (const [port, group] of keys) {
        for (const key of group) {
          expect(store.scopeOf({ prefix: limiter.prefix, key, rules })).toBe(`127.0.0.1:${port}`)
        }
      }
    }
  })
})

describe('standalone redis-server', () => {
  let server: RedisServer
  let stalled: RedisServer
  let client: Redis

  beforeAll(async () => {
    server = await RedisServer.start()
    stalled = await RedisServer.start()
    client = standaloneClient(server.port)
    await once(client, 'ready')
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
    await stalled?.stop()
  })

  it('a key of the wrong type stays that key’s problem: the breaker stays closed for the others', async () => {
    const store = new RedisStore({ client })
    const rule = fixedWindow({ limit: 5, window: '1h' })
    const limiter = new RateLimiter({
      rules: rule,
      store,
      prefix: 'wrongtype',
      onError: () => {},
      circuitBreaker: { failures: 3, cooldown: '1m' },
    })
    await client.lpush(store.keyFor(limiter.namespace, 'broken', rule), 'not a counter')
    for (let i = 0; i < 10; i++) await limiter.limit('broken')
    const others = ['alice', 'bob', 'carol']
    const results = await Promise.all(
      others.flatMap((key) => Array.from({ length: 8 }, () => limiter.limit(key))),
    )
    expect(results.every((result) => result.source === 'store')).toBe(true)
    for (const key of others) {
      expect(results.filter((result) => result.key === key && result.allowed)).toHaveLength(5)
    }
  })

  it('a Redis reply error about one key (real WRONGTYPE) opens no breaker: the others stay exact', async () => {
    const store = new RedisStore({ client })
    await client.rpush('faults:a-list', 'x')
    // Every decision for `broken` gets the reply Redis gives a script that reads a list as a string.
    const failing = Object.create(store) as RedisStore
    failing.consume = (request) =>
      request.key === 'broken'
        ? (client.eval("return redis.call('GET', KEYS[1])", 1, 'faults:a-list') as never)
        : store.consume(request)
    const { errors, onError } = recorder()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1h' }),
      store: failing,
      prefix: 'replyerror',
      onError,
      circuitBreaker: { failures: 3, cooldown: '1m' },
    })
    for (let i = 0; i < 10; i++) expect((await limiter.limit('broken')).source).toBe('policy')
    expect(errors).toHaveLength(10) // every one reached Redis: the breaker never opened
    expect(String(errors[0])).toContain('WRONGTYPE')
    const others = ['alice', 'bob', 'carol']
    const results = await Promise.all(
      others.flatMap((key) => Array.from({ length: 8 }, () => limiter.limit(key))),
    )
    expect(results.every((result) => result.source === 'store')).toBe(true)
    for (const key of others) {
      expect(results.filter((result) => result.key === key && result.allowed)).toHaveLength(5)
    }
  })

  it("a stall with 'deny': the refused requests are not charged once Redis answers", async () => {
    const store = new RedisStore({ client })
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '15m' }),
      store,
      prefix: 'stall-deny',
      onStoreError: 'deny',
      timeout: '200ms',
      onError: () => {},
      circuitBreaker: false, // the test asks Redis again right after the stall
    })
    const process_ = await pid(server)
    process.kill(process_, 'SIGSTOP')
    let refused: RateLimitResult[]
    try {
      refused = await Promise.all(Array.from({ length: 5 }, () => limiter.limit('login:alice')))
    } finally {
      process.kill(process_, 'SIGCONT')
    }
    expect(refused.map((result) => [result.allowed, result.source])).toEqual(Array(5).fill([false, 'policy']))
    // Redis now runs the five scripts it received; their late "allowed" replies are refunded, and the refunds
    // are sent before the second PING (one connection keeps order).
    await client.ping()
    await client.ping()
    const after = await Promise.all(Array.from({ length: 6 }, () => limiter.limit('login:alice')))
    expect(after.map((result) => result.allowed)).toEqual([true, true, true, true, true, false])
  })

  it("a stall with 'deny': late charges whose refunds could not be sent (shed behind one in flight) are given back once Redis answers (issue 32)", async () => {
    // Every decision or refund that would wait for a call in flight is shed: the five late replies below arrive
    // together, and of their five refunds one is sent while the four others are shed.
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '15m' }),
      store: new RedisStore({ client, maxWaiting: 0 }),
      prefix: 'stall-shed',
      onStoreError: 'deny',
      timeout: '200ms',
      onError: () => {},
      circuitBreaker: false,
    })
    const process_ = await pid(server)
    process.kill(process_, 'SIGSTOP')
    try {
      // One at a time: each is sent alone, times out, and is refused.
      for (let i = 0; i < 5; i++)
        expect(await limiter.limit('bob')).toMatchObject({ allowed: false, source: 'policy' })
    } finally {
      process.kill(process_, 'SIGCONT')
    }
    // Before issue 32 the shed refunds were dropped: 4 of the 5 refused requests stayed charged.
    let seen = -1
    await until(
      async () => {
        const peeked = await limiter.peek('bob', { cost: 0 })
        if (peeked.source === 'store') seen = peeked.remaining
        return seen === 5
      },
      () => `every refused request is given back (remaining ${seen} of 5)`,
    )
  })

  it("a stall with 'deny' and a client that gives up on its own calls (commandTimeout): what may stay charged is reported once, with the count; onError hears each failed call once, not each request (issue 32)", async () => {
    const giving = new Redis({ host: '127.0.0.1', port: server.port, ...FAIL_FAST, commandTimeout: 100 })
    giving.on('error', () => {})
    await once(giving, 'ready')
    const { reports, onError } = recorder()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1_000, window: '15m' }),
      store: new RedisStore({ client: giving }),
      prefix: 'stall-lost',
      onStoreError: 'deny',
      onError,
      circuitBreaker: false,
    })
    const process_ = await pid(server)
    const results: RateLimitResult[] = []
    process.kill(process_, 'SIGSTOP')
    try {
      // Three bursts of 20: ioredis times each call out after 100 ms and drops its reply when it comes.
      for (let burst = 0; burst < 3; burst++)
        results.push(...(await Promise.all(Array.from({ length: 20 }, () => limiter.limit('carol')))))
    } finally {
      process.kill(process_, 'SIGCONT')
    }
    try {
      expect(results.every((result) => !result.allowed && result.source === 'policy')).toBe(true)
      // Redis runs the scripts it had received: charged, refused, and no reply comes to say so.
      await until(
        () => reports.some((report) => report.operation === 'refund'),
        'the fault is reported with what may stay charged',
      )
      const charged = 1_000 - (await limiter.peek('carol', { cost: 0 })).remaining
      const summaries = reports.filter((report) => report.operation === 'refund')
      expect(summaries).toHaveLength(1)
      const { inDoubt } = summaries[0]!.error as { inDoubt: number }
      expect(charged).toBeGreaterThan(0)
      expect(inDoubt).toBeGreaterThanOrEqual(charged)
      expect(inDoubt).toBeLessThanOrEqual(60)
      expect(summaries[0]!.code).toBe('ERR_RATEWINDOW_STORE')
      // One report per failed call (a failed call answers every decision in flight or waiting with one error),
      // not one per request: 60 before issue 32.
      expect(reports.filter((report) => report.operation === 'consume').length).toBeLessThanOrEqual(6)
    } finally {
      giving.disconnect()
    }
  })

  it("a stall with 'allow': the calls sent stay charged (they were served); those past the flights in flight are never sent", async () => {
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 100, window: '15m' }),
      store: new RedisStore({ client }),
      prefix: 'stall-allow',
      timeout: '200ms',
      onError: () => {},
      circuitBreaker: false,
    })
    const process_ = await pid(server)
    process.kill(process_, 'SIGSTOP')
    const served: Promise<RateLimitResult>[] = []
    try {
      // One decision per turn of the event loop: each turn's decisions fly together while fewer than
      // DEFAULT_MAX_FLIGHTS calls are in flight; the later ones wait, and are answered when the first call times out.
      for (let turn = 0; turn < DEFAULT_MAX_FLIGHTS + 4; turn++) {
        served.push(limiter.limit('k'))
        await new Promise((resolve) => setImmediate(resolve))
      }
      await Promise.all(served)
    } finally {
      process.kill(process_, 'SIGCONT')
    }
    const results = await Promise.all(served)
    expect(results.every((result) => result.allowed && result.source === 'policy')).toBe(true)
    await client.ping()
    // The calls sent run once the server resumes and stay charged (the policy admitted them); the four that waited
    // behind the full set of flights were answered by the policy, withdrawn, and never sent (docs/redis.md).
    expect(await limiter.peek('k', { cost: 0 })).toMatchObject({
      source: 'store',
      remaining: 100 - DEFAULT_MAX_FLIGHTS,
    })
  })

  it('a hung fallback store cannot hang a request; refund() and reset() on a hung store settle', async () => {
    const hung = standaloneClient(stalled.port)
    await once(hung, 'ready')
    const process_ = await pid(stalled)
    const { reports: errors, onError } = recorder()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store: new RedisStore({ client: hung }),
      fallback: new RedisStore({ client: hung, prefix: 'fallback:' }),
      onStoreError: 'deny',
      timeout: '100ms',
      onError,
    })
    process.kill(process_, 'SIGSTOP')
    try {
      const results = await Promise.all(Array.from({ length: 3 }, () => limiter.limit('k')))
      expect(results.map((result) => [result.allowed, result.source])).toEqual(
        Array(3).fill([false, 'policy']),
      )
      await limiter.refund({ key: 'k', cost: 1, at: Date.now(), allowed: true, source: 'store' })
      await expect(limiter.reset('k')).rejects.toMatchObject({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' })
    } finally {
      process.kill(process_, 'SIGCONT')
      hung.disconnect()
    }
    expect(errors.every((error) => error.code === 'ERR_RATEWINDOW_STORE_TIMEOUT')).toBe(true)
    const count = (operation: string) => errors.filter((error) => error.operation === operation).length
    // The three decisions failed together (one group timed out, on each store): one report each, not three.
    expect([count('consume'), count('fallback'), count('refund')]).toEqual([1, 1, 1])
  })
})

describe.each(FRAMEWORKS.filter((framework) => ['Express 5', 'Koa 3', 'Fastify 5'].includes(framework.name)))(
  '$name: an onError that throws or rejects',
  (framework) => {
    it.each([
      [
        'throws',
        () => {
          throw new Error('broken onError')
        },
      ],
      ['rejects', () => Promise.reject(new Error('broken onError'))],
    ])('%s: every request still answered by the policy, nothing crashes', async (_name, onError) => {
      const down = { consume: fail, peek: fail, refund: fail, reset: fail }
      const warnings: Error[] = []
      const onWarning = (warning: Error) => warnings.push(warning)
      process.on('warning', onWarning)
      const app = await framework.start({
        global: { limit: 5, store: down, onError, skipFailedRequests: true, circuitBreaker: false },
      })
      try {
        for (let i = 0; i < 3; i++) await request(app.url).get('/').expect(200)
        // A store object of its own: two limiters with the same rules on one store would share counters.
        const denied = await framework.start({
          global: { limit: 5, store: { ...down }, onError, onStoreError: 'deny' },
        })
        await request(denied.url).get('/').expect(503)
        await denied.close()
      } finally {
        await app.close()
        process.off('warning', onWarning)
      }
      await new Promise((resolve) => setImmediate(resolve))
      expect(
        warnings.some((warning) => (warning as { code?: string }).code === 'RATEWINDOW_ONERROR_FAILED'),
      ).toBe(true)
    })
  },
)

async function fail(): Promise<never> {
  throw new Error('connect ECONNREFUSED')
}

/** Slot ranges → master port, from CLUSTER SLOTS. */
async function slotOwners(client: Cluster): Promise<Map<[number, number], number>> {
  const ranges = (await client.cluster('SLOTS')) as unknown as [number, number, [string, number]][]
  return new Map(ranges.map(([from, to, master]) => [[from, to] as [number, number], master[1]]))
}

function owningPort(owners: Map<[number, number], number>, slot: number): number {
  for (const [[from, to], port] of owners) if (slot >= from && slot <= to) return port
  throw new Error(`no master serves slot ${slot}`)
}
