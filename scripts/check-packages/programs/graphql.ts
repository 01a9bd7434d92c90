/** Programs of @ratewindow/graphql: GraphQL Yoga, Envelop alone and Apollo Server. */

import { loader, type ModuleSystem } from './load.js'

/** GraphQL Yoga with the Envelop plugin, keyed by a header, with the cost model composed into a cost function. */
export const GRAPHQL_YOGA_PROGRAM = `import { createSchema, createYoga } from 'graphql-yoga'
import { estimateCost, type GraphQLOperation, MemoryStore } from '@ratewindow/graphql'
import { type EnvelopRateLimitPlugin, useRateLimit } from '@ratewindow/graphql/envelop'

const schema = createSchema({
  typeDefs: 'type Query { books(first: Int): [Book!]! } type Book { title: String! }',
  resolvers: { Query: { books: (_: unknown, args: { first?: number }) => Array.from({ length: args.first ?? 3 }, () => ({ title: 't' })) } },
})
const cost = (operation: GraphQLOperation): number => 2 * estimateCost(operation, { listSize: 20 }).cost
export const plugin: EnvelopRateLimitPlugin = useRateLimit({
  limit: 1000,
  window: '1m',
  store: new MemoryStore(),
  maxDepth: 8,
  cost,
  actualCost: (result) => (result.errors?.length ? 0 : 1),
  key: (operation) => operation.headers?.get('x-api-key') ?? 'anonymous',
})
export const yoga = createYoga({ schema, plugins: [plugin] })
`

/** The Envelop plugin on Envelop alone (no Yoga), as a server built on Envelop uses it. */
export const GRAPHQL_ENVELOP_PROGRAM = `import { envelop, useSchema } from '@envelop/core'
import { buildSchema } from 'graphql'
import { useRateLimit } from '@ratewindow/graphql/envelop'

export const getEnveloped = envelop({
  plugins: [useSchema(buildSchema('type Query { hello: String }')), useRateLimit({ limit: 100, key: () => 'all' })],
})
`

/** Apollo Server 5 with its plugin, keyed by the typed context. */
export const GRAPHQL_APOLLO_PROGRAM = `import { ApolloServer } from '@apollo/server'
import { slidingWindowLog } from '@ratewindow/graphql'
import { rateLimitPlugin } from '@ratewindow/graphql/apollo'

interface Context {
  user?: string
}
export const server = new ApolloServer<Context>({
  typeDefs: 'type Query { hello: String! }',
  resolvers: { Query: { hello: () => 'hi' } },
  plugins: [
    rateLimitPlugin<Context>({
      rules: slidingWindowLog({ limit: 500, window: '1m' }),
      key: (operation) => operation.context.user ?? 'anonymous',
    }),
  ],
})
`

/**
 * Runtime check of @ratewindow/graphql: a Yoga or Apollo server on the plugin (limit 10) answers a cheap query
 * (cost 1), a list (1 + 4 × 1 = 5) and the same list again, refused as a GraphQL error RATE_LIMITED with 429.
 */
export function graphqlRun(moduleSystem: ModuleSystem, server: 'yoga' | 'apollo'): string {
  const load = loader(moduleSystem)
  const setup = {
    yoga: `const { createServer } = ${load('node:http')}
  const { createSchema, createYoga } = ${load('graphql-yoga')}
  const { useRateLimit } = ${load('@ratewindow/graphql/envelop')}
  const yoga = createYoga({ schema: createSchema({ typeDefs, resolvers }), plugins: [useRateLimit({ limit: 10 })], logging: false })
  const server = createServer(yoga)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = 'http://127.0.0.1:' + server.address().port + '/graphql'
  const close = () => new Promise((resolve) => server.close(resolve))`,
    apollo: `const { ApolloServer } = ${load('@apollo/server')}
  const { startStandaloneServer } = ${load('@apollo/server/standalone')}
  const { rateLimitPlugin } = ${load('@ratewindow/graphql/apollo')}
  const apollo = new ApolloServer({ typeDefs, resolvers, plugins: [rateLimitPlugin({ limit: 10 })] })
  const { url } = await startStandaloneServer(apollo, { listen: { port: 0, host: '127.0.0.1' }, context: async ({ req }) => ({ req }) })
  const close = () => apollo.stop()`,
  }[server]
  return `async function main() {
  const typeDefs = 'type Query { hello: String! books(first: Int!): [Book!]! } type Book { title: String! }'
  const resolvers = { Query: { hello: () => 'hi', books: (_, { first }) => Array.from({ length: first }, () => ({ title: 't' })) } }
  ${setup}
  const answers = []
  for (const query of ['{ hello }', '{ books(first: 4) { title } }', '{ books(first: 4) { title } }']) {
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) })
    const body = await response.json()
    answers.push([response.status, response.headers.get('ratelimit-remaining'), body.errors?.[0]?.extensions?.code].join(' '))
  }
  await close()
  const expected = '200 9 ,200 4 ,429 4 RATE_LIMITED'
  if (answers.join() !== expected) throw new Error('answers ' + answers.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}
