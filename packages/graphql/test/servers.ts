/**
 * The test servers: one schema served by GraphQL Yoga (the Envelop plugin) and by Apollo Server 5 (its plugin),
 * each on a free loopback port, asked with fetch; both take batches and stream `@defer`/`@stream` results. The
 * schema counts its resolver calls, so a test can tell an operation that ran from one refused before execution.
 */
import { createServer, type Server } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { ApolloServer, type LegacyExperimentalExecuteIncrementally } from '@apollo/server'
import { startStandaloneServer } from '@apollo/server/standalone'
import { createSchema, createYoga } from 'graphql-yoga'
import { rateLimitPlugin } from '../src/apollo.js'
import { useRateLimit } from '../src/envelop.js'
import type { GraphQLRateLimitOptions } from '../src/index.js'

export type ServerKind = 'yoga' | 'apollo'

// @defer and @stream as GraphQL Yoga's defer-stream plugin declares them: graphql 16 knows neither, and the
// executor both servers use here (graphql-tools', Yoga's own) streams what they ask for.
const typeDefs = /* GraphQL */ `
  directive @defer(if: Boolean! = true, label: String) on FRAGMENT_SPREAD | INLINE_FRAGMENT
  directive @stream(if: Boolean! = true, label: String, initialCount: Int = 0) on FIELD
  type Query {
    hello: String!
    books(first: Int): [Book!]!
    shelf: [Book!]!
    catalog(first: Int = 100000): [Book!]!
    ids(first: Int): [Int!]!
    feed: [Book!]!
    fail: String!
    booksConnection(first: Int): BookConnection!
  }
  type BookConnection {
    edges: [BookEdge!]!
  }
  type BookEdge {
    cursor: String!
    node: Book!
  }
  type Mutation {
    order: Int!
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

/**
 * graphql-tools' executor, which GraphQL Yoga runs on, as Apollo Server takes it for incremental delivery on
 * graphql 16 (`legacyExperimentalExecuteIncrementally`): loaded from Yoga's own dependencies.
 */
const legacyExecuteIncrementally = createRequire(createRequire(import.meta.url).resolve('graphql-yoga'))(
  '@graphql-tools/executor',
).execute as LegacyExperimentalExecuteIncrementally

/** What a test server's schema did. */
export interface Library {
  /** Books `shelf` returns (it has no slicing argument: the estimate assumes `listSize`). */
  shelfSize: number
  /** The most books `books(first: n)` returns, whatever `n`. */
  available: number
  /** Resolver calls of list fields so far. */
  listCalls: number
  /** Elements of lists (books and ids) the resolvers made so far. */
  elements: number
  /** Mutations run so far. */
  orders: number
  /** Books `feed` streamed before it was stopped or ended (it yields up to 100,000, one at a time). */
  fed: number
  /** Whether `feed` was stopped before its end (its consumer went away). */
  feedStopped: boolean
  /** While set, `shelf` waits for it before it makes its books. */
  gate: Promise<void> | undefined
  /** Calls of `shelf` that waited at the gate so far. */
  held: number
}

function resolvers(library: Library) {
  const book = (i: number) => ({ title: `Book ${i}`, author: { name: `Author ${i}` } })
  const list = (count: number) => {
    library.listCalls++
    library.elements += count
    return Array.from({ length: count }, (_, i) => book(i))
  }
  const sized = (_: unknown, { first }: { first?: number | null }) =>
    list(Math.min(first ?? 3, library.available))
  async function* feed() {
    let ended = false
    try {
      for (let i = 0; i < 100_000; i++) {
        await new Promise((resolve) => setImmediate(resolve))
        library.fed++
        yield book(i)
      }
      ended = true
    } finally {
      library.feedStopped = !ended
    }
  }
  return {
    Query: {
      hello: () => 'hi',
      books: sized,
      catalog: sized,
      shelf: async () => {
        if (library.gate !== undefined) {
          library.held++
          await library.gate
        }
        return list(library.shelfSize)
      },
      ids: (_: unknown, { first }: { first?: number | null }) => {
        const count = Math.min(first ?? 3, library.available)
        library.listCalls++
        library.elements += count
        return Array.from({ length: count }, (_, i) => i)
      },
      feed,
      fail: () => {
        throw new Error('this field always fails')
      },
      // A Relay connection: the slicing argument sizes `edges`, a list below it.
      booksConnection: (_: unknown, { first }: { first?: number | null }) => ({
        edges: list(Math.min(first ?? 3, library.available)).map((node, i) => ({ cursor: String(i), node })),
      }),
    },
    Mutation: { order: () => ++library.orders },
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
  /** The GraphQL endpoint. */
  url: string
  /** POSTs one operation (or, with `extensions`, a persisted query) as JSON. */
  ask(
    query: string | undefined,
    init?: { variables?: object; extensions?: object; accept?: string },
  ): Promise<Answer>
  /** POSTs `body` as it is (JSON text, as an attacker writes it), with `accept` if given. */
  post(body: string, accept?: string): Promise<Answer>
  close(): Promise<void>
}

/** A server of `kind` with the plugin on `options`; its context holds the Node request (`req`). */
export async function startServer(kind: ServerKind, options: GraphQLRateLimitOptions): Promise<TestServer> {
  const library: Library = {
    shelfSize: 3,
    available: 1000,
    listCalls: 0,
    elements: 0,
    orders: 0,
    fed: 0,
    feedStopped: false,
    gate: undefined,
    held: 0,
  }
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
      batching: { limit: 200 },
    })
    const server: Server = createServer(yoga)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`
    stop = () => new Promise<void>((resolve) => server.close(() => resolve()))
  } else {
    const plugin = rateLimitPlugin(options)
    closePlugin = plugin.close
    const apollo = new ApolloServer({
      typeDefs,
      resolvers: resolvers(library),
      plugins: [plugin],
      allowBatchedHttpRequests: true,
      legacyExperimentalExecuteIncrementally: legacyExecuteIncrementally,
    })
    const started = await startStandaloneServer(apollo, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async ({ req }) => ({ req }),
    })
    url = started.url
    stop = () => apollo.stop()
  }
  async function post(body: string, accept = 'application/graphql-response+json, application/json') {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept },
      body,
    })
    const text = await response.text()
    const json = response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : {}
    return { status: response.status, headers: response.headers, body: json, text }
  }
  return {
    kind,
    library,
    url,
    ask: (query, init = {}) =>
      post(JSON.stringify({ query, variables: init.variables, extensions: init.extensions }), init.accept),
    post,
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
