/**
 * Hostile clients against the Fastify plugin on real servers (Fastify 5 and 4), each attack as the attacker sent it:
 * raw HTTP/1.1 requests on a socket of their own. Each test is named after what got through (issue 45).
 */
import { connect } from 'node:net'
import { RedisStore, rateLimit, type Store } from '@ratewindow/fastify'
import fastify5, { type FastifyInstance } from 'fastify'
import fastify4 from 'fastify4'
import { afterEach, describe, expect, it } from 'vitest'
import { standaloneClient, uniquePrefix } from '../../../test/support/redis.js'
import { unhandledRejections } from '../../../test/support/unhandled.js'

const apps: FastifyInstance[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})
const unhandled = unhandledRejections()
afterEach(() => expect(unhandled).toEqual([]))

interface Answer {
  status: number
  headers: Record<string, string>
}

/** One raw request on a connection of its own (closed by the server after the answer): its status and headers. */
function send(port: number, method: string, path: string, apiKey: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk) => {
      text += chunk
    })
    socket.on('error', reject)
    socket.on('end', () => {
      const [head = ''] = text.split('\r\n\r\n')
      const [statusLine = '', ...lines] = head.split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers })
    })
    socket.write(
      `${method} ${path} HTTP/1.1\r\nHost: api.example\r\nX-Api-Key: ${apiKey}\r\nConnection: close\r\n` +
        `${method === 'POST' ? 'Content-Length: 0\r\n' : ''}\r\n`,
    )
  })
}

/** The routes of the trial's B2B API, and the units each costs in its budget. */
const COSTS: Record<string, number> = {
  'GET /search': 1, // the plugin's options
  'GET /export': 10, // `config.ratewindow: { cost: 10 }`
  'GET /report': 5, // cost, and response options of its own
  'GET /status': 1, // skip-by-outcome options only
}

const VERSIONS = [
  ['Fastify 5', fastify5],
  ['Fastify 4', fastify4 as unknown as typeof fastify5],
] as const

/** `count` times `value`. */
function times<T>(count: number, value: T): T[] {
  return Array.from({ length: count }, () => value)
}

/** The port of `app`, listening on 127.0.0.1. */
async function listen(app: FastifyInstance): Promise<number> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  return typeof address === 'object' && address !== null ? address.port : 0
}

/** `count` raw requests of API key `k`, taking `routes` (`'HEAD /export'`) in turn: the statuses answered. */
async function statuses(port: number, count: number, routes: readonly string[]): Promise<number[]> {
  const answered: number[] = []
  for (let turn = 0; turn < count; turn++) {
    const [method, path] = routes[turn % routes.length]!.split(' ') as [string, string]
    answered.push((await send(port, method, path, 'k')).status)
  }
  return answered
}

describe.each(VERSIONS)('%s', (name, create) => {
  /** The API: 20 units an hour per API key, an export route costing 10, a login with its own limit of 3. */
  async function start(store?: Store): Promise<{ app: FastifyInstance; port: number }> {
    const app = create()
    apps.push(app)
    await app.register(rateLimit, {
      ...(store && { store }),
      limit: 20,
      window: '1h',
      algorithm: 'sliding-window-log',
      key: (request) => String(request.headers['x-api-key']),
    })
    app.get('/search', async () => 'results')
    app.get('/export', { config: { ratewindow: { cost: 10 } } }, async () => 'export.csv')
    app.get(
      '/report',
      { config: { ratewindow: { cost: 5, headers: 'draft-7', statusCode: 503, message: 'later' } } },
      async () => 'report.pdf',
    )
    app.get('/status', { config: { ratewindow: { skipFailedRequests: true } } }, async () => 'up')
    app.post('/login', { config: { ratewindow: { limit: 3 } } }, async () => 'welcome')
    await app.listen({ port: 0, host: '127.0.0.1' })
    const address = app.server.address()
    return { app, port: typeof address === 'object' && address !== null ? address.port : 0 }
  }

  /** Sends `routes` in turn, again and again, until each was refused once in a row: the units admitted. */
  async function spend(port: number, apiKey: string, routes: readonly string[]): Promise<number> {
    let units = 0
    let refusedInARow = 0
    for (let turn = 0; refusedInARow < routes.length && turn < 100; turn++) {
      const route = routes[turn % routes.length]!
      const [method, path] = route.split(' ') as [string, string]
      const { status } = await send(port, method, path, apiKey)
      if (status === 200) {
        units += COSTS[route]!
        refusedInARow = 0
      } else {
        expect([429, 503]).toContain(status)
        refusedInARow++
      }
    }
    return units
  }

  it('a route cost counted apart from the plugin: a free key got 20 units of exports and 20 of searches', async () => {
    const { port } = await start()
    // As the attacker did it: the export route until refused, then every other route.
    expect(await spend(port, 'free-1', ['GET /export'])).toBe(20)
    expect(await spend(port, 'free-1', ['GET /search', 'GET /report', 'GET /status'])).toBe(0)
    // The other way round, and interleaved: exactly the plugin's 20 units whatever the mix.
    expect(await spend(port, 'free-2', ['GET /search', 'GET /status'])).toBe(20)
    expect(await spend(port, 'free-2', ['GET /export', 'GET /report'])).toBe(0)
    expect(await spend(port, 'free-3', ['GET /report', 'GET /search', 'GET /export', 'GET /status'])).toBe(20)
    // A route that sets its own limit keeps a limiter of its own, as before.
    const logins = await Promise.all([1, 2, 3, 4].map(() => send(port, 'POST', '/login', 'free-3')))
    expect(logins.map((each) => each.status).sort()).toEqual([200, 200, 200, 429])
  })

  it('on Redis as on memory: the export route spent a budget of its own', async () => {
    const { port } = await start(new RedisStore({ client: standaloneClient(), prefix: uniquePrefix() }))
    expect(await spend(port, 'free-6', ['GET /search', 'GET /export', 'GET /report'])).toBe(20)
    expect(await spend(port, 'free-6', ['GET /status'])).toBe(0)
  })

  it('each route answered with its own remaining count: one budget, told alike on every route', async () => {
    const { port } = await start()
    const exported = await send(port, 'GET', '/export', 'free-4')
    expect([exported.status, exported.headers['ratelimit-remaining']]).toEqual([200, '10'])
    const searched = await send(port, 'GET', '/search', 'free-4')
    expect([searched.status, searched.headers['ratelimit-remaining']]).toEqual([200, '9'])
    // The report's own response options still apply: draft-7 fields, and its status and body when refused.
    const reported = await send(port, 'GET', '/report', 'free-4')
    expect(reported.status).toBe(200)
    expect(reported.headers.ratelimit).toMatch(/^limit=20, remaining=4, reset=\d+$/)
    expect((await send(port, 'GET', '/report', 'free-4')).status).toBe(503)
  })

  it("a GET route's HEAD twin and a prefixed '/' route's trailing-slash twins counted apart: the handlers ran 10 and 15 times against limits of 5", async () => {
    const runs = { export: 0, index: 0 }
    const app = create()
    apps.push(app)
    await app.register(rateLimit, {
      limit: 100,
      window: '1m',
      key: (request) => String(request.headers['x-api-key']),
    })
    const ownLimit = { config: { ratewindow: { limit: 5, window: '1m' } } } as const
    app.get('/export', ownLimit, async () => {
      runs.export++
      return 'export.csv'
    })
    await app.register(
      async (child) => {
        child.get('/', ownLimit, async () => {
          runs.index++
          return 'api index'
        })
      },
      { prefix: '/api' },
    )
    const port = await listen(app)
    expect(await statuses(port, 10, ['GET /export'])).toEqual([...times(5, 200), ...times(5, 429)])
    expect(await statuses(port, 10, ['HEAD /export'])).toEqual(times(10, 429))
    // Every URL and method Fastify answers for the one '/' route, in turn: one budget of 5 between them.
    const index = await statuses(port, 16, ['GET /api', 'HEAD /api', 'HEAD /api/', 'GET /api/'])
    expect(index).toEqual([...times(5, 200), ...times(11, 429)])
    expect(runs).toEqual({ export: 5, index: 5 })
    // One limiter per declared route: its scope resets the twins too, and the routes listed are the declared ones.
    await app.ratewindow.resetKey('k', { route: 'GET /export' })
    expect(await statuses(port, 6, ['HEAD /export'])).toEqual([...times(5, 200), 429])
    await app.ratewindow.resetKey('k', { route: '/api' })
    expect(await statuses(port, 6, ['HEAD /api/', 'GET /api/'])).toEqual([...times(5, 200), 429])
    await expect(app.ratewindow.resetKey('k', { route: 'GET /nothing' })).rejects.toThrow(
      'Routes with a limiter of their own: GET /export, GET /api.',
    )
  })

  it("a prefixed '/' route's twins with ignoreTrailingSlash: HEAD /api/ reached a second limiter of the route", async () => {
    let runs = 0
    const ignoreTrailingSlash = { ignoreTrailingSlash: true }
    const app = create(name === 'Fastify 4' ? ignoreTrailingSlash : { routerOptions: ignoreTrailingSlash })
    apps.push(app)
    await app.register(rateLimit, { key: (request) => String(request.headers['x-api-key']) })
    await app.register(
      async (child) => {
        child.get('/', { config: { ratewindow: { limit: 3, window: '1m' } } }, async () => {
          runs++
          return 'api index'
        })
      },
      { prefix: '/api' },
    )
    const port = await listen(app)
    const index = await statuses(port, 8, ['HEAD /api/', 'GET /api/', 'HEAD /api', 'GET /api'])
    expect(index).toEqual([...times(3, 200), ...times(5, 429)])
    expect(runs).toBe(3) // a HEAD route runs the GET handler
  })

  it("the plugin's budget through a route's twins: GET and HEAD, with and without the slash, spend one budget", async () => {
    const app = create()
    apps.push(app)
    await app.register(rateLimit, {
      limit: 6,
      window: '1m',
      key: (request) => String(request.headers['x-api-key']),
    })
    app.get('/export', { config: { ratewindow: { cost: 2 } } }, async () => 'export.csv')
    await app.register(async (child) => child.get('/', async () => 'api index'), { prefix: '/api' })
    const port = await listen(app)
    // 1 + 1 + 1 + 1 + 2 units: the plugin's 6.
    const answered = await statuses(port, 8, [
      'GET /api',
      'HEAD /api',
      'HEAD /api/',
      'GET /api/',
      'HEAD /export',
    ])
    expect(answered).toEqual([...times(5, 200), ...times(3, 429)])
  })

  it('a group of route limiters counted apart when the plugin had no store: two routes of a group of 5 ran 10 times', async () => {
    const runs = { a: 0, b: 0 }
    const app = create()
    apps.push(app)
    // As every README example registers it: no `store`.
    await app.register(rateLimit, {
      limit: 20,
      window: '1m',
      key: (request) => String(request.headers['x-api-key']),
    })
    const exports = { config: { ratewindow: { limit: 5, window: '1m', group: 'exports' } } } as const
    app.get('/export/a', exports, async () => {
      runs.a++
      return 'a'
    })
    app.get('/export/b', exports, async () => {
      runs.b++
      return 'b'
    })
    const port = await listen(app)
    expect(await statuses(port, 10, ['GET /export/a'])).toEqual([...times(5, 200), ...times(5, 429)])
    expect(await statuses(port, 10, ['GET /export/b'])).toEqual(times(10, 429))
    expect(runs.a + runs.b).toBe(5)
  })

  it('two registrations: an answer told 95 remaining from the user limit, then the IP limit of 5 refused', async () => {
    const app = create()
    apps.push(app)
    await app.register(rateLimit, { limit: 5, window: '1m', prefix: 'ip' })
    await app.register(rateLimit, {
      limit: 100,
      window: '1m',
      prefix: 'user',
      hook: 'preHandler',
      key: (request) => String(request.headers['x-api-key']),
    })
    app.get('/', async () => 'ok')
    const port = await listen(app)
    const told: string[] = []
    for (let request = 1; request <= 7; request++) {
      const { status, headers } = await send(port, 'GET', '/', 'k1')
      told.push(`${status} ${headers['ratelimit-limit']} ${headers['ratelimit-remaining']}`)
    }
    // The fields of the limiter with the fewest requests left, then the refusing limiter's.
    expect(told).toEqual(['200 5 4', '200 5 3', '200 5 2', '200 5 1', '200 5 0', '429 5 0', '429 5 0'])
  })

  it("two registrations: a 429 from the user limit carried the IP limit's X-RateLimit-Remaining beside its own fields", async () => {
    const app = create()
    apps.push(app)
    await app.register(rateLimit, { limit: 5, window: '1m', prefix: 'ip', legacyHeaders: true })
    await app.register(rateLimit, {
      limit: 2,
      window: '1m',
      prefix: 'user',
      hook: 'preHandler',
      key: (request) => String(request.headers['x-api-key']),
    })
    app.get('/', async () => 'ok')
    const port = await listen(app)
    const told: string[] = []
    for (let request = 1; request <= 3; request++) {
      const { status, headers } = await send(port, 'GET', '/', 'k1')
      told.push(
        `${status} ${headers['ratelimit-limit']} ${headers['ratelimit-remaining']} ${headers['x-ratelimit-remaining']}`,
      )
    }
    expect(told).toEqual(['200 2 1 undefined', '200 2 0 undefined', '429 2 0 undefined'])
  })

  it('a reset scope naming a route without a limiter of its own rejects, naming why; a reset of the plugin frees every route', async () => {
    const { app, port } = await start()
    expect(await spend(port, 'free-5', ['GET /export'])).toBe(20)
    await expect(app.ratewindow.resetKey('free-5', { route: 'GET /export' })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      option: 'scope',
      message: expect.stringContaining(
        "GET /export counts in its registration's budget (its `config.ratewindow` changes neither the rules nor the key)",
      ),
    })
    await expect(app.ratewindow.resetKey('free-5', { route: '/status' })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
    })
    await app.ratewindow.resetKey('free-5', { route: 'POST /login' })
    expect((await send(port, 'GET', '/search', 'free-5')).status).toBe(429)
    await app.ratewindow.resetKey('free-5', { registration: app })
    expect(await spend(port, 'free-5', ['GET /export', 'GET /search'])).toBe(20)
  })
})
