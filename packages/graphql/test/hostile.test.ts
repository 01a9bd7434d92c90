/**
 * Hostile clients against both plugins on real servers (GraphQL Yoga, Apollo Server 5), each attack as the
 * attacker sent it: the raw JSON body of an HTTP POST. Each test is named after what got through (issue 45).
 */
import { createHash } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'
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

/** The incremental delivery each server speaks: Yoga multipart/mixed, Apollo its deferSpec on graphql 16. */
const STREAMED: Record<ServerKind, string> = {
  yoga: 'multipart/mixed',
  apollo: 'multipart/mixed; deferSpec=20220824',
}

const code = (answer: Answer) => answer.body.errors?.[0]?.extensions?.code
const titles = (text: string) => text.match(/"title":/g)?.length ?? 0

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
      expect(refused.body.errors?.[0]).toMatchObject({
        message:
          'The operation costs 100001, more than the rate limit admits at once: it could never run. Ask for fewer fields or smaller lists.',
        extensions: { code: 'MAX_COST_EXCEEDED', cost: 100_001 },
      })
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

  it('@stream results were never settled: the stream is settled when it ends, every payload counted', async () => {
    const server = await start(kind)
    server.library.shelfSize = 300 // shelf has no slicing argument: estimated 1 + 10, actually 1 + 300
    const streamed = await server.ask('{ shelf @stream { title } }', { accept: STREAMED[kind] })
    expect([streamed.status, titles(streamed.text)]).toEqual([200, 300])
    expect(remaining(await server.ask('{ hello }'))).toBe(1000 - 301 - 1)
  })

  it('200 concurrent operations estimated 11 that each made 1,001 ran 90,090 units against limit 1,000 + maxDebt 1,000: at most `concurrency` run at once', async () => {
    const server = await start(kind)
    // { shelf { title } }: shelf has no slicing argument, so it is estimated 1 + 10 × 1 = 11; it makes 1 + 1,000.
    server.library.shelfSize = 1000
    let open = () => {}
    server.library.gate = new Promise<void>((resolve) => {
      open = resolve
    })
    let answered = 0
    const sent = Array.from({ length: 200 }, () =>
      server.post('{"query":"{ shelf { title } }"}').then((answer) => {
        answered++
        return answer
      }),
    )
    // Every operation is admitted on its estimate before any settles: all are decided, the admitted ones running.
    await until(
      () => server.library.held + answered === 200,
      () => `every operation was refused or ran (${server.library.held} ran, ${answered} answered)`,
    )
    open()
    const answers = await Promise.all(sent)
    const work = server.library.listCalls + server.library.elements
    // The bound: limit + maxDebt (its default, the limit) + concurrency (its default, 10) × the underestimate.
    expect(work).toBeLessThanOrEqual(1000 + 1000 + 10 * (1001 - 11))
    expect(answers.filter((answer) => answer.status === 200).length).toBe(server.library.held)
    expect(new Set(answers.filter((answer) => answer.status !== 200).map(code))).toEqual(
      new Set(['RATE_LIMITED']),
    )
  })

  it('operations that ran longer than the lease lost their in-flight slots: 20 ran at once against concurrency 10 (the slots are renewed while they run)', async () => {
    const server = await start(kind, { concurrency: { limit: 2, lease: '1s' } })
    let open = () => {}
    server.library.gate = new Promise<void>((resolve) => {
      open = resolve
    })
    const first = [server.ask('{ shelf { title } }'), server.ask('{ shelf { title } }')]
    await until(() => server.library.held === 2, 'two operations hold their slots')
    // The lease runs on the server's own clock: real time passes beyond it (a second and a half) while both run.
    const since = Date.now()
    await until(() => Date.now() - since >= 1_500, 'one and a half leases have passed', { within: 5_000 })
    const third = await server.ask('{ hello }')
    expect([third.status, code(third)]).toEqual([429, 'RATE_LIMITED'])
    open()
    expect((await Promise.all(first)).map((answer) => answer.status)).toEqual([200, 200])
    expect((await server.ask('{ hello }')).status).toBe(200)
  })

  it('a Relay connection books(first: 600000) { edges { node { title } } } was estimated 32 and ran: first sizes edges', async () => {
    const server = await start(kind)
    const huge = await server.post(
      '{"query":"{ booksConnection(first: 600000) { edges { node { title } } } }"}',
    )
    expect([huge.status, code(huge), huge.body.errors?.[0]?.extensions?.cost]).toEqual([
      400,
      'MAX_COST_EXCEEDED',
      1 + 1 + 600_000 * 2,
    ])
    expect(server.library.listCalls).toBe(0)
    // 1 + (1 + 300 × (1 + 1)) = 602, estimated and actually.
    const some = await server.post('{"query":"{ booksConnection(first: 300) { edges { node { title } } } }"}')
    expect([some.status, remaining(some)]).toEqual([200, 1000 - 602])
  })

  it('200 aliases of __schema in one operation cost 200 units and built 200 schema dumps: refused before any store call', async () => {
    const server = await start(kind)
    const dump = '__schema { types { name fields { name } } }'
    const refused = await server.post(`{"query":"{ a: ${dump} b: ${dump} }"}`)
    expect([refused.status, code(refused)]).toEqual([400, 'MAX_INTROSPECTION_EXCEEDED'])
    expect(refused.headers.get('ratelimit-remaining')).toBeNull()
    const one = await server.post(`{"query":"{ a: ${dump} }"}`)
    expect([one.status, remaining(one)]).toEqual([200, 1000 - 1])
  })

  it('an operation that failed, streamed or was deferred kept its in-flight slot: each gives it back once done', async () => {
    const server = await start(kind, { concurrency: { limit: 1 } })
    const seen: string[] = []
    for (const [query, accept] of [
      ['{ hello }', undefined],
      ['{ fail }', undefined],
      ['{ books(first: 2) @stream { title } }', STREAMED[kind]],
      ['{ hello ... @defer { shelf { title } } }', STREAMED[kind]],
      ['{ hello }', undefined],
    ] as const) {
      const answer = await server.ask(query, accept === undefined ? {} : { accept })
      seen.push(answer.status === 429 ? 'refused' : 'ran')
    }
    expect(seen).toEqual(['ran', 'ran', 'ran', 'ran', 'ran'])
  })

  it('@defer results were never settled: the deferred part is counted at its path', async () => {
    const server = await start(kind)
    server.library.shelfSize = 300 // estimated 1 + (1 + 10), actually 1 + (1 + 300)
    const body = '{"query":"{ hello ... @defer { shelf { title } } }"}'
    const streamed = await server.post(body, STREAMED[kind])
    expect([streamed.status, titles(streamed.text)]).toEqual([200, 300])
    expect(remaining(await server.ask('{ hello }'))).toBe(1000 - 302 - 1)
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

it('Yoga: a cancelled stream was never settled: it is settled with what it delivered', async () => {
  const server = await start('yoga')
  const abort = new AbortController()
  const response = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: STREAMED.yoga },
    body: '{"query":"{ feed @stream { title } }"}', // estimated 1 + 10 × 1 = 11; feed yields up to 100,000
    signal: abort.signal,
  })
  const reader = response.body!.getReader()
  let text = ''
  while (titles(text) < 50) text += new TextDecoder().decode((await reader.read()).value)
  abort.abort()
  await reader.cancel().catch(() => undefined)
  await until(() => server.library.feedStopped, 'the feed was stopped by the cancelled stream')
  const received = titles(text)
  // Each { hello } costs 1: what the stream was charged is what the window used besides them.
  let hellos = 0
  let charged = 0
  await until(
    async () => {
      const answer = await server.ask('{ hello }')
      hellos++
      charged = 1000 - (remaining(answer) ?? 1000) - hellos
      return charged >= 1 + received
    },
    () => `the stream was charged for the ${received} books it delivered (charged ${charged})`,
    { every: 20 },
  )
  expect(charged).toBeLessThanOrEqual(1 + server.library.fed)
  expect(server.library.fed).toBeLessThan(100_000)
})

it('Apollo answered a batch with one refused operation 429 although 100 ran: a retrying client ran them twice', async () => {
  // Every operation of the batch in flight at once (no `concurrency` bound): the batch's status is the point here.
  const server = await start('apollo', { limit: 100, concurrency: false })
  const batchOf = (size: number) =>
    `[${Array.from({ length: size }, () => '{"query":"mutation { order }"}').join(',')}]`
  const answer = await server.post(batchOf(101))
  expect(answer.status).toBe(200)
  const results = answer.body as unknown as Answer['body'][]
  expect(results.filter((result) => result.data !== undefined).length).toBe(100)
  expect(results.flatMap((result) => result.errors ?? []).map((error) => error.extensions?.code)).toEqual([
    'RATE_LIMITED',
  ])
  expect(answer.headers.get('retry-after')).toBeNull()
  expect(server.library.orders).toBe(100)
  // A batch in which nothing ran keeps the refusal's status: retrying it runs nothing twice.
  const refused = await server.post(batchOf(2))
  expect([refused.status, server.library.orders]).toEqual([429, 100])
})
