/**
 * The limits on real servers with real clients (`ws`, `socket.io-client`), on the memory store, Redis and the
 * 3-master Cluster: a client that floods, one that leaves mid-burst, many connections of one key, the HTTP limit
 * on the upgrade. The same cases run on every server (test/harness.ts): one engine, four bindings.
 */
import {
  type ConcurrencyStore,
  fixedWindow,
  MemoryStore,
  RateLimiter,
  RedisStore,
  type Store,
} from '@ratewindow/core'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'
import { clusterClient, standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import {
  type CommonOptions,
  type Connected,
  everyRefusalTold,
  HARNESSES,
  type TestClient,
  type TestServer,
} from './harness.js'

const STORES: [string, () => Store & ConcurrencyStore][] = [
  ['memory', () => new MemoryStore()],
  ['Redis', () => new RedisStore({ client: standaloneClient() })],
  ['the Cluster', () => new RedisStore({ client: clusterClient() })],
]

const servers: TestServer[] = []
const clients: TestClient[] = []
afterEach(async () => {
  for (const client of clients.splice(0)) client.terminate()
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

function opened(connected: Connected): TestClient {
  if (!connected.ok) throw new Error(`the upgrade was refused: ${connected.status}`)
  clients.push(connected.client)
  return connected.client
}

describe.each(HARNESSES)('$name', (harness) => {
  async function start(options: CommonOptions): Promise<TestServer> {
    const server = await harness.start(options)
    servers.push(server)
    return server
  }

  /** Socket.IO: the namespace CONNECT is a message too (one of the limit, under the connection's key). */
  const connects = harness.name === 'Socket.IO' ? 1 : 0

  describe.each(STORES)('on %s', (_, makeStore) => {
    it('a client that floods: exactly the limit delivered, each message past it dropped and told why', async () => {
      const rules = fixedWindow({ limit: 5, window: '1h' })
      const server = await start({
        messagesPerKey: { rules, store: makeStore(), prefix: uniquePrefix() },
        clock: everyRefusalTold(),
      })
      const client = opened(await harness.connect(server.port))
      for (let i = 0; i < 12; i++) client.send(`m${i}`)
      const refused = 7 + connects
      await until(
        () => client.told.length === refused,
        () => `${refused} refusals told (told ${client.told.length}, delivered ${server.delivered.length})`,
      )
      expect(server.delivered).toEqual(['m0', 'm1', 'm2', 'm3', 'm4'].slice(0, 5 - connects))
      expect(client.told.map((error) => [error.error, error.reason])).toEqual(
        Array(refused).fill(['rate_limited', 'limit']),
      )
      // The wait in seconds (rounded up, as HTTP's Retry-After) and in milliseconds.
      for (const { retryAfter, retryAfterMs } of client.told) {
        expect(retryAfterMs).toBeGreaterThan(0)
        expect(retryAfterMs).toBeLessThanOrEqual(3_600_000)
        expect(retryAfter).toBe(Math.ceil(retryAfterMs / 1000))
      }
      expect(client.closed).toBeUndefined()
    })

    it("onLimit 'close': the limit delivered, then the connection closed with 1008 and the reason", async () => {
      const rules = fixedWindow({ limit: 3, window: '1h' })
      const server = await start({
        messagesPerConnection: { rules, store: makeStore(), prefix: uniquePrefix() },
        onLimit: 'close',
      })
      const client = opened(await harness.connect(server.port))
      for (let i = 0; i < 8; i++) client.send(`m${i}`)
      await until(() => client.closed !== undefined, 'the connection closed')
      expect(server.delivered).toEqual(['m0', 'm1', 'm2'].slice(0, 3 - connects))
      expect(client.closed).toEqual(
        harness.name === 'Socket.IO'
          ? { code: 1008, reason: 'io server disconnect' }
          : { code: 1008, reason: 'rate limited' },
      )
    })

    it('many connections of one key: the connection limit holds, the others refused with 429 and Retry-After', async () => {
      const server = await start({ connections: { limit: 2, store: makeStore(), prefix: uniquePrefix() } })
      const attempts = await Promise.all(Array.from({ length: 5 }, () => harness.connect(server.port, 'bob')))
      const open = attempts.filter((attempt) => attempt.ok)
      for (const attempt of open) clients.push(attempt.client)
      const refused = attempts.filter((attempt) => !attempt.ok)
      expect(open).toHaveLength(2)
      if (harness.name === 'Socket.IO')
        // Socket.IO: the client's connect_error, with why and the wait.
        expect(refused.map((attempt) => attempt.refusal)).toEqual(
          Array(3).fill({ error: 'rate_limited', reason: 'connections', retryAfter: 1, retryAfterMs: 1_000 }),
        )
      else {
        expect(refused.map((attempt) => attempt.status)).toEqual([429, 429, 429])
        expect(refused.every((attempt) => attempt.headers['retry-after'] === '1')).toBe(true)
      }
      // Another key has slots of its own; one of bob's that closes gives its slot back.
      opened(await harness.connect(server.port, 'carol'))
      open[0]!.client.close()
      await until(async () => {
        const again = await harness.connect(server.port, 'bob')
        if (again.ok) clients.push(again.client)
        return again.ok
      }, "a new connection of bob's, once one closed")
    })

    it('a client that leaves mid-burst: its slot back, and every charge delivered or given back', async () => {
      const rules = fixedWindow({ limit: 1_000, window: '1h' })
      const store = makeStore()
      const prefix = uniquePrefix()
      const server = await start({
        connections: { limit: 1, store, prefix: `${prefix}c` },
        messagesPerKey: { rules, store, prefix },
      })
      const client = opened(await harness.connect(server.port, 'dave'))
      for (let i = 0; i < 40; i++) client.send(`m${i}`)
      client.terminate()
      await until(async () => {
        const again = await harness.connect(server.port, 'dave')
        if (again.ok) clients.push(again.client)
        return again.ok
      }, 'the slot back: a new connection of the key')
      await server.close()
      servers.splice(servers.indexOf(server), 1)
      const counter = new RateLimiter({ rules, store, prefix })
      // Socket.IO: and the CONNECTs of the two connections.
      const charged = () => server.delivered.length + 2 * connects
      await until(
        async () => (await counter.peek('dave', { cost: 0 })).remaining === 1_000 - charged(),
        () => `the charges equal to the ${charged()} messages delivered`,
      )
    })
  })

  it('the HTTP limit on the upgrade: past it, 429 with the RateLimit headers and Retry-After', async () => {
    const server = await start({ upgrade: { limit: 2, window: '1m' } })
    opened(await harness.connect(server.port, 'erin'))
    opened(await harness.connect(server.port, 'erin'))
    const refused = await harness.connect(server.port, 'erin')
    if (harness.name === 'Socket.IO')
      expect(refused).toMatchObject({ ok: false, refusal: { error: 'rate_limited', reason: 'limit' } })
    else
      expect(refused).toMatchObject({
        ok: false,
        status: 429,
        headers: {
          'ratelimit-limit': '2',
          'ratelimit-remaining': '0',
          'retry-after': expect.stringMatching(/^[1-9][0-9]*$/),
        },
      })
  })
})
