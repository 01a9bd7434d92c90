/**
 * The hostile-client attacks of every HTTP surface (the "Every HTTP surface" section of the hostile-clients notes),
 * for the adapters that sit on Node's HTTP server and read the client's address through their framework's own
 * trust-proxy setting (Express, Koa). Each attack is written as the attacker wrote it (raw HTTP/1.1 on a socket of
 * its own) against one real server per framework version, which the package's hostile test file builds from the
 * suite's routes (`AttackApp`) with its own middleware (`AttackedFramework.serve`). Each test is named after what
 * got through, or would.
 */
import { connect } from 'node:net'
import { type Duration, MemoryStore, RedisStore, type Store } from '@ratewindow/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pipelined, until } from './connections.js'
import { closed, countStatuses, openGet, type RawServer, rawGet, rawStatuses } from './raw-http.js'
import { standaloneClient, uniquePrefix } from './redis.js'

/** The rateLimit() options the attack routes use: none that takes a request. */
export interface AttackLimit {
  limit: number
  window: Duration
  store?: Store
  message?: string
  concurrency?: { limit: number }
  timeout: Duration
  onStoreError: 'deny'
}

/**
 * What every attack route's limiter adds to its options: the store's answer awaited (a Redis call held up by a
 * loaded machine is not the attack), and a store failure refused, never admitted as the default policy would.
 */
const STRICT = { timeout: '30s', onStoreError: 'deny' } as const

/** One route of the attacked app: the middleware in order, then a handler that runs `work` and answers 'ok'. */
export interface AttackRoute {
  /** The limiter of every path under `under` (an app-wide one, mounted on a prefix), then the route's own. */
  prefixLimit?: { under: string; options: AttackLimit }
  rateLimit?: AttackLimit
  slowDown?: { windowMs: number; delayAfter: number; delayMs: () => number; maxPerKey: number }
  /** Awaited by the handler before it answers; the handler counts its runs (`ran`). */
  work?: () => Promise<void>
}

/** What the package's app must serve: the routes by path, where the app behind `/trusted/` trusts 1 proxy hop. */
export interface AttackApp {
  routes: Record<string, AttackRoute>
  /** Handler runs by path. */
  ran: Record<string, number>
  /** The `code` of each error the app's error handler received (the package's error handler pushes them). */
  errors: string[]
}

/** The rateLimit() middleware's handles the suite reads. */
export interface LimiterHandles {
  operator: { inspect(key: string): Promise<{ rules: { used: number }[] }> }
}

/** A framework version under attack: `serve` builds its apps for `app` (untrusted, and 1 hop under `/trusted/`). */
export interface AttackedFramework {
  name: string
  serve(app: AttackApp): Promise<{ server: RawServer; limiters: Record<string, LimiterHandles> }>
}

const STORES: [string, () => Store][] = [
  ['memory', () => new MemoryStore()],
  ['Redis', () => new RedisStore({ client: standaloneClient(), prefix: uniquePrefix() })],
]

/** `count` times `value`. */
const times = <T>(count: number, value: T): T[] => Array.from({ length: count }, () => value)

/** Handlers parked until `release()`: how many run now, and how many started in all. */
function parking() {
  let open: () => void = () => {}
  let gate = new Promise<void>((resolve) => {
    open = resolve
  })
  const park = {
    running: 0,
    started: 0,
    async wait() {
      park.running++
      park.started++
      try {
        await gate
      } finally {
        park.running--
      }
    },
    release() {
      open()
      gate = new Promise<void>((resolve) => {
        open = resolve
      })
    },
  }
  return park
}

/** The attacks, against each of `frameworks`. */
export function describeHostileClients(frameworks: AttackedFramework[]): void {
  describe.each(frameworks.map((framework) => [framework.name, framework] as const))(
    '%s',
    (_name, framework) => {
      let server: RawServer
      let limiters: Record<string, LimiterHandles>
      const work = parking()
      /** The delay `slowDown()` gives on GET /delayed, ms. */
      let delay = 60_000
      /** Store calls of the limiter of GET /flood. */
      let floodDecisions = 0
      const app: AttackApp = { routes: {}, ran: {}, errors: [] }
      const { ran, errors } = app

      beforeAll(async () => {
        const counted = new MemoryStore()
        const consume = counted.consume.bind(counted)
        counted.consume = (request) => {
          floodDecisions++
          return consume(request)
        }
        app.routes = {
          // No trust: the socket's address is the key, whatever the client writes.
          '/spoof': { rateLimit: { ...STRICT, limit: 3, window: '1h' } },
          ...Object.fromEntries(
            STORES.map(([store, make]) => [
              `/pipeline/${store}`,
              { rateLimit: { ...STRICT, limit: 50, window: '1h', store: make() } },
            ]),
          ),
          // A refusal of 64 KiB, so that what the server buffers for a client that never reads shows at once.
          '/flood': {
            rateLimit: { ...STRICT, limit: 1, window: '1h', store: counted, message: 'x'.repeat(64 * 1024) },
          },
          '/work': {
            rateLimit: { ...STRICT, limit: 1000, window: '1h', concurrency: { limit: 2 } },
            work: () => work.wait(),
          },
          '/delayed': {
            slowDown: { windowMs: 3_600_000, delayAfter: 1, delayMs: () => delay, maxPerKey: 2 },
          },
          // Two limiters on one request: one for everything under /two (as an app-wide one), and the route's own.
          '/two/search': {
            prefixLimit: { under: '/two', options: { ...STRICT, limit: 3, window: '1h' } },
            rateLimit: { ...STRICT, limit: 10, window: '1h' },
          },
          // 1 proxy hop trusted: the rightmost X-Forwarded-For entry is the client.
          ...Object.fromEntries(
            STORES.map(([store, make]) => [
              `/trusted/${store}`,
              { rateLimit: { ...STRICT, limit: 3, window: '1h', store: make() } },
            ]),
          ),
        }
        ;({ server, limiters } = await framework.serve(app))
      })
      afterAll(() => server?.close())

      const get = (path: string, headers: Record<string, string> = {}) => rawGet(server.port, path, headers)

      it('spoofed X-Forwarded-For, X-Real-IP and Forwarded without trust: 12 clients named, 3 admitted (one key)', async () => {
        const spoofs = (i: number): Record<string, string>[] => [
          { 'X-Forwarded-For': `203.0.113.${i}` },
          { 'X-Real-IP': `198.51.100.${i}` },
          { Forwarded: `for=192.0.2.${i}` },
          {
            'X-Forwarded-For': `2001:db8::${i}`,
            'X-Real-IP': `2001:db8::${i}`,
            Forwarded: `for="[2001:db8::${i}]"`,
          },
        ]
        const statuses = await rawStatuses(server.port, '/spoof', 12, (i) => spoofs(i)[i % 4]!)
        expect(statuses).toEqual([...times(3, 200), ...times(9, 429)])
        expect(ran['/spoof']).toBe(3)
      })

      describe.each(STORES.map(([store]) => store))('1 proxy hop trusted, %s store', (store) => {
        const path = `/trusted/${store}`
        let client = 0
        /** An address of the documentation range no other test of this file uses. */
        const fresh = () => `198.51.100.${++client + (store === 'Redis' ? 100 : 0)}`
        const from = (address: string) => () => ({ 'X-Forwarded-For': address })

        // Session 6: the framework keeps a port a proxy wrote in the request's address; every such request answered
        // 500 (ERR_RATEWINDOW_INVALID_IP) before the adapters read the address without it, as Hono's and Next's do.
        it('entries with ports: a client rotating its port never got a fresh budget (one budget, the port ignored)', async () => {
          const address = fresh()
          const statuses = await rawStatuses(server.port, path, 6, (i) => ({
            'X-Forwarded-For': `${address}:${40_000 + i}`,
          }))
          expect(statuses).toEqual([...times(3, 200), ...times(3, 429)])
          expect(errors.splice(0)).toEqual([])
          // The address without a port is the same client.
          expect(await rawStatuses(server.port, path, 1, from(address))).toEqual([429])
        })

        it('IPv6 with zones: 8 zones of one address got one budget of 3', async () => {
          const statuses = await rawStatuses(server.port, path, 8, (i) => ({
            'X-Forwarded-For': `2001:db8:${store === 'Redis' ? 'a' : 'b'}::1%eth${i}`,
          }))
          expect(statuses).toEqual([...times(3, 200), ...times(5, 429)])
        })

        it('`unknown` and garbage: refused, counted nowhere, never one bucket shared with other clients', async () => {
          const values = [
            'unknown',
            'garbage',
            '999.1.1.1',
            '::::',
            '127.0.0.01',
            '\u00e9\u00e9',
            'a'.repeat(8000),
          ]
          const before = ran[path] ?? 0
          const statuses = await rawStatuses(server.port, path, values.length * 2, (i) => ({
            'X-Forwarded-For': values[i % values.length]!,
          }))
          expect(statuses).toEqual(times(values.length * 2, 500))
          expect(new Set(errors.splice(0))).toEqual(new Set(['ERR_RATEWINDOW_INVALID_IP']))
          expect(ran[path] ?? 0).toBe(before)
          // Two clients with addresses still have a budget each.
          for (const address of [fresh(), fresh()]) {
            expect(await rawStatuses(server.port, path, 4, from(address))).toEqual([...times(3, 200), 429])
          }
        })

        it("hundreds of entries: a client writing 500 addresses of its own before the proxy's got one budget", async () => {
          const address = fresh()
          const own = (i: number) =>
            Array.from({ length: 500 }, (_, entry) => `10.${i}.${entry >> 8}.${entry & 255}`)
          const statuses = await rawStatuses(server.port, path, 6, (i) => ({
            'X-Forwarded-For': `${own(i).join(', ')}, ${address}`,
          }))
          expect(statuses).toEqual([...times(3, 200), ...times(3, 429)])
        })

        it('IPv4-mapped IPv6: `::ffff:` + the address and the address itself shared one budget', async () => {
          const address = fresh()
          const statuses = await rawStatuses(server.port, path, 6, (i) => ({
            'X-Forwarded-For': i % 2 ? address : `::ffff:${address}`,
          }))
          expect(statuses).toEqual([...times(3, 200), ...times(3, 429)])
        })

        it('one client rotating through its IPv6 /64 (and its /56, the default `ipv6Subnet`): 12 addresses, one budget', async () => {
          const net = store === 'Redis' ? '2001:db8:77' : '2001:db8:78'
          const statuses = await rawStatuses(server.port, path, 12, (i) => ({
            'X-Forwarded-For':
              i < 6 ? `${net}:1:${i}:${i * 7}:${i * 13}:${i + 1}` : `${net}:${(i * 16).toString(16)}::${i}`,
          }))
          expect(statuses).toEqual([...times(3, 200), ...times(9, 429)])
        })
      })

      it.each(STORES.map(([store]) => store))(
        '%s store: 2,000 requests pipelined on one connection, closed after 200 answers: 50 admitted and counted, no more',
        async (store) => {
          const path = `/pipeline/${store}`
          const answers = (text: string) => text.split('HTTP/1.1 ').length - 1
          const flood = await pipelined(`http://127.0.0.1:${server.port}`, 2_000, path)
          // A bound for a loaded machine: 2,000 requests parsed and answered one after another.
          await until(
            () => answers(flood.received()) >= 200,
            () => `200 answers (${answers(flood.received())} came)`,
            { within: 30_000 },
          )
          await flood.close()
          // Every answer that came whole: 50 admitted, the rest refused.
          const statuses = countStatuses(flood.received())
          expect(statuses[200]).toBe(50)
          expect(Object.keys(statuses)).toEqual(['200', '429'])
          expect((await get(path)).status).toBe(429)
          expect(ran[path]).toBe(50)
          expect((await limiters[path]!.operator.inspect('127.0.0.1')).rules[0]!.used).toBe(50)
        },
      )

      it('clients that left while holding a `concurrency` slot: the slots came back, never more than 2 at once', async () => {
        for (let round = 0; round < 3; round++) {
          const holders = [openGet(server.port, '/work'), openGet(server.port, '/work')]
          await until(
            () => work.running === 2,
            () => `2 handlers running (${work.running})`,
          )
          expect((await get('/work')).status).toBe(429)
          await Promise.all(holders.map((holder) => holder.leave()))
          work.release()
          await until(() => work.running === 0, 'the handlers returned')
        }
        // No slot leaked: 2 run again at once, the third refused.
        const holders = [openGet(server.port, '/work'), openGet(server.port, '/work')]
        await until(
          () => work.running === 2,
          () => `2 handlers running (${work.running})`,
        )
        expect((await get('/work')).status).toBe(429)
        work.release()
        await until(() => holders.every((holder) => holder.status === 200), 'both answered')
        await Promise.all(holders.map((holder) => holder.leave()))
        expect(work.started).toBe(8)
      })

      it('clients that left while delayed by slowDown(): never served, and their waiting places came back', async () => {
        delay = 60_000
        expect((await get('/delayed')).status).toBe(200) // the first request is not delayed
        const waiting = [openGet(server.port, '/delayed'), openGet(server.port, '/delayed')]
        // `maxPerKey: 2`: a third delayed request is refused at once.
        await until(async () => (await get('/delayed')).status === 429, 'a third delayed request is refused')
        await Promise.all(waiting.map((each) => each.leave()))
        // A short delay from now on: the next request is served if the places came back, refused if they leaked.
        delay = 1
        await until(async () => (await get('/delayed')).status === 200, 'a delayed request is served again')
        expect(ran['/delayed']).toBe(2)
      })

      it('a client that never reads while flooding refused requests: the server stopped reading it, its buffer bounded', async () => {
        expect((await get('/flood')).status).toBe(200)
        const decided = floodDecisions
        const socket = connect(server.port, '127.0.0.1')
        socket.on('error', () => {})
        socket.pause() // never reads
        // 2,000 requests of 1 KiB each: 128 MB of refusals, if the server wrote them all.
        const padding = `X-Padding: ${'p'.repeat(1000)}\r\n`
        socket.write(`GET /flood HTTP/1.1\r\nHost: api.example\r\n${padding}\r\n`.repeat(2_000))
        // The server stops reading the client once its writes to it wait, and decides no more.
        const buffered = () => [...server.sockets].reduce((sum, each) => sum + each.writableLength, 0)
        let seen = -1
        await until(
          () => {
            const settled = seen === floodDecisions && [...server.sockets].some((each) => each.isPaused())
            seen = floodDecisions
            return settled && buffered() > 0
          },
          () =>
            `the server stops reading (${floodDecisions - decided} decided, ${buffered()} bytes buffered)`,
          { every: 50 },
        )
        expect(floodDecisions - decided).toBeLessThan(1_000)
        // At most the refusal being written, beside what the kernel holds.
        expect(buffered()).toBeLessThanOrEqual(2 * 64 * 1024)
        await closed(socket)
        expect(ran['/flood']).toBe(1)
      })

      // FOUND on Express and Koa in session 6's round, fixed: the route's limiter wrote its fields over the app-wide
      // one's (docs/headers.md then: "the response describes the last one"), so a client was told 9, 8, 7 left by the
      // route's limit of 10, then refused by the app-wide limit of 3. Now the limiter with the fewest left answers, as
      // the Fastify plugin's registrations did (core's `showFields`). Raw request, four times from one address:
      // `GET /two/search HTTP/1.1`.
      it('two limiters on one request (3 app-wide, 10 the route): 200s that told 9, 8, 7 left, then a 429', async () => {
        const told: string[] = []
        for (let request = 0; request < 5; request++) {
          const { status, headers } = await get('/two/search')
          told.push(`${status} ${headers['ratelimit-limit']} ${headers['ratelimit-remaining']}`)
        }
        expect(ran['/two/search']).toBe(3)
        // The fields of the limiter with the fewest requests left, then those of the refusing limiter.
        expect(told).toEqual(['200 3 2', '200 3 1', '200 3 0', '429 3 0', '429 3 0'])
      })
    },
  )
}
