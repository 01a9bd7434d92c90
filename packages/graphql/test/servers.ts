/**
 * The test servers: one schema served by GraphQL Yoga (the Envelop plugin) and by Apollo Server 5 (its plugin),
 * each on a free loopback port, asked with fetch. The schema counts its resolver calls, so a test can tell an
 * operation that ran from one refused before execution.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ApolloServer } from '@apollo/server'
import { startStandaloneServer } from '@apollo/server/standalone'
import { createSchema, createYoga } from 'graphql-yoga'
import { rateLimitPlugin } from '../src/apollo.js'
import { useRateLimit } from '../src/envelop.js'
import type { GraphQLRateLimitOptions } from '../src/index.js'

export type ServerKind = 'yoga' | 'apollo'

const typeDefs = /* GraphQL */ `
  type Query {
    hello: String!
    books(first: Int): [Book!]!
    shelf: [Book!]!
  }
  type Book {
    title: String!
    author: Author!
  }
  type Author {
    name: String!
    books(first: Int): [Book!]!
  }
  type Subscription {
    ticks: Int!
  }
`

/** What a test server's schema did. */
export interface Library {
  /** Books `shelf` returns (it has no slicing argument: the estimate assumes `listSize`). */
  shelfSize: number
  /** The most books `books(first: n)` returns, whatever `n`. */
  available: number
  /** Resolver calls of list fields so far. */
  listCalls: number
}

function resolvers(library: Library) {
  const book = (i: number) => ({ title: `Book ${i}`, author: { name: `Author ${i}` } })
  const list = (count: number) => {
    library.listCalls++
    return Array.from({ length: count }, (_, i) => book(i))
  }
  return {
    Query: {
      hello: () => 'hi',
      books: (_: unknown, { first }: { first?: number }) => list(Math.min(first ?? 3, library.available)),
      shelf: () => list(library.shelfSize),
    },
    Author: { books: (_: unknown, { first }: { first?: number }) => list(first ?? 3) },
    Subscription: {
      ticks: {
        async *subscribe() {
          for (let tick = 1; tick <= 3; tick++) yield { ticks: tick }
        },
      },
    },
  }
}

/** One answer: status, headers and the parsed JSON body (or the text of an event stream). */
export interface Answer {
  status: number
  headers: Headers
  body: { data?: unknown; errors?: { message: string; extensions?: Record<string, unknown> }[] }
  text: string
}

export interface TestServer {
  kind: ServerKind
  library: Library
  /** POSTs one operation (or, with `extensions`, a persisted query) as JSON. */
  ask(
    query: string | undefined,
    init?: { variables?: object; extensions?: object; accept?: string },
  ): Promise<Answer>
  close(): Promise<void>
}

/** A server of `kind` with the plugin on `options`; its context holds the Node request (`req`). */
export async function startServer(kind: ServerKind, options: GraphQLRateLimitOptions): Promise<TestServer> {
  const library: Library = { shelfSize: 3, available: 1000, listCalls: 0 }
  let url: string
  let stop: () => Promise<void>
  let closePlugin: () => void
  if (kind === 'yoga') {
    const plugin = useRateLimit(options)
    closePlugin = plugin.close
    const yoga = createYoga({
      schema: createSchema({ typeDefs, resolvers: resolvers(library) }),
      plugins: [plugin],
      logging: false,
      maskedErrors: false,
    })
    const server: Server = createServer(yoga)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`
    stop = () => new Promise<void>((resolve) => server.close(() => resolve()))
  } else {
    const plugin = rateLimitPlugin(options)
    closePlugin = plugin.close
    const apollo = new ApolloServer({ typeDefs, resolvers: resolvers(library), plugins: [plugin] })
    const started = await startStandaloneServer(apollo, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async ({ req }) => ({ req }),
    })
    url = started.url
    stop = () => apollo.stop()
  }
  return {
    kind,
    library,
    async ask(query, init = {}) {
      const response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: init.accept ?? 'application/graphql-response+json, application/json',
        },
        body: JSON.stringify({ query, variables: init.variables, extensions: init.extensions }),
      })
      const text = await response.text()
      const json = response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : {}
      return { status: response.status, headers: response.headers, body: json, text }
    },
    async close() {
      closePlugin()
      await stop()
    },
  }
}

/** The `RateLimit-Remaining` header (draft-6) of an answer, as a number. */
export function remaining(answer: Answer): number | undefined {
  const value = answer.headers.get('ratelimit-remaining')
  return value === null ? undefined : Number(value)
}
