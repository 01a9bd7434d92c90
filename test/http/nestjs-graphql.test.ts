/**
 * @ratewindow/nestjs in GraphQL contexts (issue 38): the guard on resolvers of real @nestjs/graphql apps, Apollo on
 * platform-express and Mercurius on platform-fastify, queried over HTTP with fetch; memory and Redis. Nest 12 only
 * (vitest.nest11.config.ts does not include this file). Resolvers are schema-first: esbuild emits no design types.
 */
import type { Server } from 'node:http'
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo'
import { Module } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import { Args, GraphQLModule, Query, Resolver } from '@nestjs/graphql'
import { MercuriusDriver, type MercuriusDriverConfig } from '@nestjs/mercurius'
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { Test } from '@nestjs/testing'
import { rateLimitPlugin } from '@ratewindow/graphql/apollo'
import {
  MemoryStore,
  RateLimit,
  RateWindowGuard,
  RateWindowModule,
  type RateWindowModuleOptions,
  RedisStore,
  SkipRateLimit,
} from '@ratewindow/nestjs'
import { mercuriusRateLimit } from '@ratewindow/nestjs/mercurius'
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { standaloneClient } from '../support/redis.js'

type Driver = 'apollo' | 'mercurius'

const typeDefs = /* GraphQL */ `
  type Query {
    hello: String
    expensive(n: Int): String
    free: String
    books(first: Int): [Book]
  }
  type Book {
    title: String
  }
`

/** How many times each resolver ran. */
const calls = { hello: 0, expensive: 0, free: 0 }

@Resolver()
class QueryResolver {
  @Query()
  hello() {
    calls.hello++
    return 'hi'
  }

  @Query()
  @RateLimit({ name: 'expensive', limit: 10, cost: 4 })
  expensive(@Args('n') n?: number) {
    calls.expensive++
    return `x${n ?? 0}`
  }

  @Query()
  books() {
    return [{ title: 'one' }, { title: 'two' }]
  }

  @Query()
  @SkipRateLimit()
  free() {
    calls.free++
    return 'free'
  }
}

interface GraphQLAnswer {
  status: number
  headers: Headers
  body: {
    data?: Record<string, unknown> | null
    errors?: { message: string; path?: string[]; extensions?: Record<string, unknown> }[]
  }
}

let close: (() => Promise<void>) | undefined
afterEach(async () => {
  await close?.()
  close = undefined
  for (const name of Object.keys(calls) as (keyof typeof calls)[]) calls[name] = 0
})

/** A Nest app with the resolver, the guard global, on the driver's platform (trusting a proxy on loopback). */
async function start(
  driver: Driver,
  options: RateWindowModuleOptions,
  // biome-ignore lint/suspicious/noExplicitAny: the Apollo driver's plugin list
  plugins: any[] = [],
  hooks?: MercuriusDriverConfig['hooks'],
): Promise<(query: string, headers?: Record<string, string>) => Promise<GraphQLAnswer>> {
  const graphql =
    driver === 'apollo'
      ? GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, typeDefs, plugins })
      : GraphQLModule.forRoot<MercuriusDriverConfig>({ driver: MercuriusDriver, typeDefs, hooks })

  @Module({
    imports: [RateWindowModule.forRoot(options), graphql],
    providers: [QueryResolver, { provide: APP_GUARD, useClass: RateWindowGuard }],
  })
  class AppModule {}

  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
  const app = moduleRef.createNestApplication<NestExpressApplication>(
    driver === 'apollo' ? new ExpressAdapter() : new FastifyAdapter({ trustProxy: '127.0.0.1' }),
    { logger: false },
  )
  if (driver === 'apollo') app.set('trust proxy', 'loopback')
  await app.listen(0, '127.0.0.1')
  close = () => app.close()
  const { port } = (app.getHttpServer() as Server).address() as { port: number }
  return async (query, headers = {}) => {
    const response = await fetch(`http://127.0.0.1:${port}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query }),
    })
    return {
      status: response.status,
      headers: response.headers,
      body: (await response.json()) as GraphQLAnswer['body'],
    }
  }
}

/** Stores on a clock the tests hold still: no window boundary falls between two queries. */
const stores = {
  memory: () => new MemoryStore({ clock: new ManualClock().read }),
  redis: () => new RedisStore({ client: standaloneClient(), clock: new ManualClock().read }),
}

describe.each([
  ['apollo', 'Apollo on platform-express'],
  ['mercurius', 'Mercurius on platform-fastify'],
] as const)('Nest 12 GraphQL, %s (%s)', (driver, _platform) => {
  describe.each(['memory', 'redis'] as const)('on %s', (storeName) => {
    it("resolvers limited: one decision per guarded resolver call, @RateLimit({ cost }) per resolution, the refusal shaped as docs/graphql.md's", async () => {
      const query = await start(driver, {
        limit: 3,
        window: '1m',
        graphql: true,
        store: stores[storeName](),
        prefix: `nest-gql-${driver}-${Date.now()}:`,
      })
      for (let i = 1; i <= 3; i++) {
        const ok = await query('{ hello }')
        expect(ok.body).toEqual({ data: { hello: 'hi' } })
        expect(ok.headers.get('ratelimit-remaining')).toBe(String(3 - i))
      }
      const refused = await query('{ hello free }')
      expect(refused.status).toBe(200)
      expect(refused.body.data).toEqual({ hello: null, free: 'free' })
      expect(refused.body.errors).toHaveLength(1)
      const [error] = refused.body.errors!
      expect(error!.path).toEqual(['hello'])
      expect(error!.message).toMatch(/^Too many requests: retry in \d+ seconds?\.$/)
      expect(error!.extensions).toMatchObject({ code: 'RATE_LIMITED' })
      const retryAfter = error!.extensions!.retryAfter as number
      expect(retryAfter).toBeGreaterThan(0)
      expect(refused.headers.get('retry-after')).toBe(String(retryAfter))
      expect(refused.headers.get('ratelimit-remaining')).toBe('0')
      expect(calls.hello).toBe(3)

      // `expensive` has its own limiter (10 a minute, cost 4): two aliases in one operation are two resolutions.
      const both = await query('{ a: expensive(n: 1) b: expensive(n: 2) }')
      expect(both.body).toEqual({ data: { a: 'x1', b: 'x2' } })
      const third = await query('{ expensive }')
      expect(third.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED' })
      expect(calls.expensive).toBe(2)
    })
  })

  it('keys from the HTTP request of the GraphQL context, as the platform trusts a proxy', async () => {
    const query = await start(driver, { limit: 1, window: '1m', graphql: true, store: stores.memory() })
    const one = { 'x-forwarded-for': '203.0.113.1' }
    const two = { 'x-forwarded-for': '203.0.113.2' }
    expect((await query('{ hello }', one)).body.errors).toBeUndefined()
    expect((await query('{ hello }', two)).body.errors).toBeUndefined()
    expect((await query('{ hello }', one)).body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED')
  })

  it('without graphql: true, GraphQL passes untouched (as before): no decision, no headers', async () => {
    const query = await start(driver, { limit: 1, window: '1m' })
    for (let i = 0; i < 4; i++) {
      const answer = await query('{ hello expensive }')
      expect(answer.body).toEqual({ data: { hello: 'hi', expensive: 'x0' } })
      expect(answer.headers.get('ratelimit-remaining')).toBeNull()
    }
  })

  it('hostile: a thousand aliases of a limited field resolve at most `limit` times', async () => {
    const query = await start(driver, { limit: 5, window: '1m', graphql: true, store: stores.memory() })
    const aliases = Array.from({ length: 1000 }, (_, i) => `a${i}: hello`).join(' ')
    const answer = await query(`{ ${aliases} }`)
    expect(calls.hello).toBe(5)
    expect(answer.body.errors).toHaveLength(995)
  })
})

describe('Nest 12 GraphQL, resolvers checked at start', () => {
  it("with graphql: true, a resolver's @SkipRateLimit() naming no limiter is refused when the app starts", async () => {
    @Resolver()
    class TypoResolver {
      @Query()
      @SkipRateLimit('defualt')
      hello() {
        return 'hi'
      }
    }
    @Module({
      imports: [
        RateWindowModule.forRoot({ limit: 1, window: '1m', graphql: true }),
        GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          typeDefs: 'type Query { hello: String }',
        }),
      ],
      providers: [TypoResolver],
    })
    class TypoModule {}
    const moduleRef = await Test.createTestingModule({ imports: [TypoModule] }).compile()
    const app = moduleRef.createNestApplication(new ExpressAdapter(), { logger: false })
    close = () => app.close()
    // The error, not the app (which a failed `rejects` would print whole).
    const error = await app.init().then(
      () => undefined,
      (reason: Error) => reason.message,
    )
    expect(error).toBe(
      "`@SkipRateLimit('defualt')` of TypoResolver.hello names no limiter of this app; its limiters: 'default'. " +
        'See https://github.com/ratewindow/ratewindow/blob/main/docs/errors.md#err-ratewindow-unknown-limiter',
    )
  })
})

/** The cost model's limiter for a driver: @ratewindow/graphql's Apollo plugin, or our Mercurius hooks. */
function costModel(driver: Driver) {
  const options = { limit: 20, window: '1m', prefix: `nest-gql-cost-${driver}-${Date.now()}:` } as const
  const store = stores.redis()
  if (driver === 'mercurius') return { hooks: mercuriusRateLimit({ ...options, store }).hooks, plugins: [] }
  const plugin = rateLimitPlugin({
    ...options,
    store,
    // The client address as Express gives it behind the trusted proxy (`req.ip`).
    clientIp: (operation) => (operation.context as { req: { ip?: string } }).req.ip,
  })
  return { hooks: undefined, plugins: [plugin] }
}

describe.each(['apollo', 'mercurius'] as const)(
  'Nest 12 GraphQL, %s driver with the operation cost model (Redis)',
  (driver) => {
    it('the estimate decided once per operation before any resolver, settled to the actual cost; a refusal 429 with Retry-After; hostile operations refused unrun', async () => {
      const { plugins, hooks } = costModel(driver)
      const query = await start(
        driver,
        { limit: 100, window: '1m', graphql: true, store: stores.memory() },
        plugins,
        hooks,
      )
      const cheap = await query('{ hello }')
      expect(cheap.body).toEqual({ data: { hello: 'hi' } })
      // The plugin's figures are written after the guard's: the operation's budget (20, 1 used), then 2 more.
      expect(cheap.headers.get('ratelimit-remaining')).toBe('19')
      const two = await query('{ hello free }')
      expect(two.headers.get('ratelimit-remaining')).toBe('17')
      // Estimated 1 + 10 × 1 = 11, two books came back: settled to 1 + 2 × 1 = 3 before the response.
      const settled = await query('{ books(first: 10) { title } }')
      expect(settled.body.data?.books).toHaveLength(2)
      expect(settled.headers.get('ratelimit-remaining')).toBe('14')
      const aliases = Array.from({ length: 1000 }, (_, i) => `a${i}: hello`).join(' ')
      const hostile = await query(`{ ${aliases} }`)
      expect(hostile.status).toBe(400)
      expect(hostile.body.errors).toHaveLength(1)
      expect(hostile.body.errors?.[0]?.extensions).toMatchObject({ code: 'MAX_COST_EXCEEDED', cost: 1000 })
      const tooMuch = await query(
        `{ ${aliases
          .split(' ')
          .slice(0, 15 * 2)
          .join(' ')} }`,
      )
      expect(tooMuch.status).toBe(429)
      expect(tooMuch.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', cost: 15 })
      expect(tooMuch.body.errors?.[0]?.extensions?.retryAfter).toBeGreaterThan(0)
      expect(tooMuch.headers.get('retry-after')).toBe(
        String(tooMuch.body.errors?.[0]?.extensions?.retryAfter),
      )
      expect(calls.hello).toBe(2)
    })
  },
)
