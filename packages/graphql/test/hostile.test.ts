/**
 * Hostile clients against both plugins on real servers (GraphQL Yoga, Apollo Server 5), each attack as the
 * attacker sent it: the raw JSON body of an HTTP POST. Each test is named after what got through (issue 45).
 */
import { createHash } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { unhandledRejections } from '../../../test/support/unhandled.js'
import type { GraphQLRateLimitOptions } from '../src/index.js'
import { type Answer, remaining, type ServerKind, startServer, type TestServer } from './servers.js'

const servers: TestServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})
const unhandled = unhandledRejections()
afterEach(() => expect(unhandled).toEqual([]))

async function start(kind: ServerKind, options: GraphQLRateLimitOptions = {}): Promise<TestServer> {
  const server = await startServer(kind, { limit: 1000, window: '1m', ...options })
  servers.push(server)
  return server
}

const code = (answer: Answer) => answer.body.errors?.[0]?.extensions?.code

/** Sends `body` `times` times, one after the other; the statuses. */
async function statuses(server: TestServer, body: string, times: number): Promise<number[]> {
  const seen: number[] = []
  for (let i = 0; i < times; i++) seen.push((await server.post(body)).status)
  return seen
}

describe.each<ServerKind>(['yoga', 'apollo'])('%s', (kind) => {
  it('an alias named __schema settled a list of 499 books to 1 unit: the actual cost follows the fields', async () => {
    const server = await start(kind)
    const body = '{"query":"{ __schema: books(first: 499) { title } }"}'
    // 1 + 499 = 500 each, estimated and actually: two fit in 1,000 units, the third is refused.
    expect(await statuses(server, body, 4)).toEqual([200, 200, 429, 429])
    expect(server.library.elements).toBe(2 * 499)
  })

  it('a list size from a variable default or an argument default was not read: refused as the literal is', async () => {
    const server = await start(kind)
    for (const body of [
      '{"query":"query Q($n: Int = 100000) { books(first: $n) { title } }"}',
      '{"query":"{ books(first: 100000) { title } }"}',
      '{"query":"{ catalog { title } }"}', // catalog(first: Int = 100000) in the schema
    ]) {
      const refused = await server.post(body)
      expect(refused.status).toBe(400)
      expect(refused.body.errors?.[0]?.extensions).toEqual({ code: 'MAX_COST_EXCEEDED', cost: 100_001 })
    }
    expect(server.library.listCalls).toBe(0)
  })

  it('a list of scalars cost 1 whatever its size: { ids(first: 200000) } is refused, { ids(first: 400) } costs 401', async () => {
    const server = await start(kind)
    const huge = await server.post('{"query":"{ ids(first: 200000) }"}')
    expect([huge.status, code(huge), huge.body.errors?.[0]?.extensions?.cost]).toEqual([
      400,
      'MAX_COST_EXCEEDED',
      200_001,
    ])
    const some = await server.post('{"query":"{ ids(first: 400) }"}')
    expect([some.status, remaining(some)]).toEqual([200, 1000 - 401])
    expect(server.library.elements).toBe(400)
  })

  it('an operation whose data ended up null was refunded although its resolvers ran: the estimate stands', async () => {
    const server = await start(kind)
    // fail: String! throws, so data is null; books(first: 300) ran all the same. 1 + 300 + 1 = 302.
    const answer = await server.post('{"query":"{ books(first: 300) { title } fail }"}')
    expect(answer.body.data).toBeNull()
    expect(server.library.elements).toBe(300)
    expect(remaining(answer)).toBe(1000 - 302)
  })
})

it('Apollo through an automatic persisted query: the aliased list is charged by its fields', async () => {
  const server = await start('apollo')
  const query = '{ __schema: books(first: 499) { title } }'
  const sha256Hash = createHash('sha256').update(query).digest('hex')
  const extensions = `"extensions":{"persistedQuery":{"version":1,"sha256Hash":"${sha256Hash}"}}`
  expect((await server.post(`{"query":${JSON.stringify(query)},${extensions}}`)).status).toBe(200)
  expect(await statuses(server, `{${extensions}}`, 3)).toEqual([200, 429, 429])
  expect(server.library.elements).toBe(2 * 499)
})
