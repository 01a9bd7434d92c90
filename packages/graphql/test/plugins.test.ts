/**
 * Both plugins on real servers (GraphQL Yoga, Apollo Server 5) asked over HTTP with fetch, on the memory store and
 * on a real redis-server: operations charged by their estimates, settled to their actual cost, refused as
 * documented, hostile operations stopped before any store call.
 */
import { MemoryStore, RedisStore, type Store, SyncedStore } from '@ratewindow/core'
import { afterEach, describe, expect, it } from 'vitest'
import { standaloneClient } from '../../../test/support/redis.js'
import { rateLimitPlugin } from '../src/apollo.js'
import { useRateLimit } from '../src/envelop.js'
import type { GraphQLRateLimitOptions } from '../src/index.js'
import { remaining, type ServerKind, startServer, type TestServer } from './servers.js'

let prefixes = 0
/** A prefix of its own per server: tests never share counters, in one Redis or across runs. */
const freshPrefix = () => `gq${process.pid}x${Date.now().toString(36)}x${prefixes++}`

const STORES: [string, () => Store][] = [
  ['memory', () => new MemoryStore()],
  ['Redis', () => new RedisStore({ client: standaloneClient() })],
]
const KINDS: ServerKind[] = ['yoga', 'apollo']

const servers: TestServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

/** 1 + 5 × (title + author + author.name) = 16 */
const EXPENSIVE = '{ books(first: 5) { title author { name } } }'

describe.each(STORES)('on %s', (_store, makeStore) => {
  describe.each(KINDS)('%s', (kind) => {
    const start = async (options: GraphQLRateLimitOptions) => {
      const server = await startServer(kind, { store: makeStore(), prefix: freshPrefix(), ...options })
      servers.push(server)
      return server
    }

    it('charges a cheap query and an expensive one by their estimates', async () => {
      const server = await start({ limit: 100 })
      const cheap = await server.ask('{ hello }')
      expect([cheap.status, cheap.body.data, remaining(cheap)]).toEqual([200, { hello: 'hi' }, 99])
      const expensive = await server.ask(EXPENSIVE)
      expect([expensive.status, remaining(expensive)]).toEqual([200, 99 - 16])
    })

    it('settles a query whose estimate is low and actual cost high: the difference, up to what the rules admit', async () => {
      const server = await start({ limit: 45 })
      server.library.shelfSize = 30 // `shelf` has no slicing argument: estimated 1 + 10 × 1 = 11, actually 31
      const first = await server.ask('{ shelf { title } }')
      expect([first.status, remaining(first)]).toEqual([200, 45 - 31]) // 11 reserved, 20 charged on settle
      const second = await server.ask('{ shelf { title } }')
      // 11 reserved of 14; of the 20 more, only the 3 left are charged: remaining 0, never below.
      expect([second.status, remaining(second)]).toEqual([200, 0])
      const refused = await server.ask('{ hello }')
      expect([refused.status, refused.body.errors?.[0]?.extensions?.code]).toEqual([429, 'RATE_LIMITED'])
    })

    it('gives back what the estimate held above the actual cost', async () => {
      const server = await start({ limit: 100 })
      server.library.available = 3
      const answer = await server.ask('{ books(first: 50) { title } }') // 51 reserved; 3 books come back: 4
      expect([answer.status, remaining(answer)]).toEqual([200, 100 - 4])
    })

    it('refuses as documented: a GraphQL error RATE_LIMITED with retryAfter, status 429, the RateLimit headers', async () => {
      const server = await start({ limit: 20 })
      expect(remaining(await server.ask(EXPENSIVE))).toBe(4)
      const calls = server.library.listCalls
      const refused = await server.ask(EXPENSIVE)
      expect(refused.status).toBe(429)
      const [error, ...others] = refused.body.errors ?? []
      expect(others).toEqual([])
      expect(error?.extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: expect.any(Number), cost: 16 })
      expect(error?.message).toMatch(/^Too many requests: retry in \d+ seconds?\.$/)
      const retryAfter = error?.extensions?.retryAfter as number
      expect(retryAfter).toBeGreaterThan(0)
      expect(refused.headers.get('retry-after')).toBe(String(retryAfter))
      expect(refused.headers.get('ratelimit-limit')).toBe('20')
      expect(remaining(refused)).toBe(4)
      expect(refused.body.data ?? undefined).toBeUndefined()
      expect(server.library.listCalls).toBe(calls) // nothing executed
      expect(remaining(await server.ask('{ hello }'))).toBe(3) // a cheaper one still fits
    })

    it('stops hostile operations by the depth guard and the cost, before any store call or resolver', async () => {
      const server = await start({ limit: 1000, maxDepth: 8 })
      const deep = `{ ${'books { author { '.repeat(20)}name${' } }'.repeat(20)} }`
      const tooDeep = await server.ask(deep)
      expect([tooDeep.status, tooDeep.body.errors?.[0]?.extensions?.code]).toEqual([
        400,
        'MAX_DEPTH_EXCEEDED',
      ])
      const huge = await server.ask('{ books(first: 1000000000) { title } }')
      expect([huge.status, huge.body.errors?.[0]?.extensions]).toEqual([
        400,
        { code: 'MAX_COST_EXCEEDED', cost: 1_000_000_001 },
      ])
      const byVariable = await server.ask('query ($n: Int) { books(first: $n) { title author { name } } }', {
        variables: { n: 2_000_000_000 },
      })
      expect(byVariable.body.errors?.[0]?.extensions?.code).toBe('MAX_COST_EXCEEDED')
      // 40 fragments, each spreading the one before twice: 2^40 titles, read in 40 steps.
      const fragments = Array.from({ length: 40 }, (_, i) =>
        i === 0 ? 'fragment F0 on Book { title }' : `fragment F${i} on Book { ...F${i - 1} ...F${i - 1} }`,
      )
      const bomb = await server.ask(`{ books(first: 1) { ...F39 } } ${fragments.join(' ')}`)
      expect(bomb.body.errors?.[0]?.extensions?.code).toBe('MAX_COST_EXCEEDED')
      expect(server.library.listCalls).toBe(0)
      expect(remaining(await server.ask('{ hello }'))).toBe(999) // none of them was charged
    })
  })
})

describe('stores that cannot settle', () => {
  /** A store with every call but `charge`. */
  class NoChargeStore implements Store {
    readonly #memory = new MemoryStore()
    consume: Store['consume'] = (request) => this.#memory.consume(request)
    peek: Store['peek'] = (request) => this.#memory.peek(request)
    refund: Store['refund'] = (request) => this.#memory.refund(request)
    reset: Store['reset'] = (target) => this.#memory.reset(target)
  }

  it('refuses a store without `charge` at construction, naming it, in both plugins', () => {
    const plugins: ((options: GraphQLRateLimitOptions) => unknown)[] = [useRateLimit, rateLimitPlugin]
    for (const make of plugins) {
      expect(() => make({ store: new NoChargeStore() })).toThrow(
        expect.objectContaining({
          code: 'ERR_RATEWINDOW_INVALID_OPTION',
          option: 'store',
          message: expect.stringMatching(/^`store`: NoChargeStore has no `charge`/),
        }),
      )
      expect(() => make({ fallback: new NoChargeStore() })).toThrow(
        /^`fallback`: NoChargeStore has no `charge`/,
      )
    }
  })

  it('accepts SyncedStore, which charges since issue 34 (it was refused for having no `charge`)', async () => {
    const store = new SyncedStore({ client: standaloneClient() })
    try {
      expect(() => rateLimitPlugin({ store }).close()).not.toThrow()
      expect(() => rateLimitPlugin({ store, actualCost: false }).close()).not.toThrow()
    } finally {
      await store.close()
    }
  })
})

describe('subscriptions and persisted queries', () => {
  it('Yoga: a subscription reserves its estimate once, when it subscribes; its events are not charged', async () => {
    const server = await startServer('yoga', { limit: 10, prefix: freshPrefix() })
    servers.push(server)
    const stream = await server.ask('subscription { ticks }', { accept: 'text/event-stream' })
    expect(stream.status).toBe(200)
    expect(stream.text.match(/"ticks":\d/g)).toEqual(['"ticks":1', '"ticks":2', '"ticks":3'])
    expect(remaining(stream)).toBe(9)
    expect(remaining(await server.ask('{ hello }'))).toBe(8)
  })

  it('Apollo: a persisted query is charged by its document when it runs; a lookup that misses is not', async () => {
    const server = await startServer('apollo', { limit: 100, prefix: freshPrefix() })
    servers.push(server)
    const { createHash } = await import('node:crypto')
    const sha256Hash = createHash('sha256').update(EXPENSIVE).digest('hex')
    const extensions = { persistedQuery: { version: 1, sha256Hash } }
    const missed = await server.ask(undefined, { extensions })
    expect(missed.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_FOUND')
    expect(remaining(missed)).toBeUndefined()
    expect(remaining(await server.ask(EXPENSIVE, { extensions }))).toBe(100 - 16)
    expect(remaining(await server.ask(undefined, { extensions }))).toBe(100 - 32)
  })
})
