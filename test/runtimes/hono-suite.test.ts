/**
 * The Hono adapter's HTTP suite on Node (`@hono/node-server`), Bun, Deno and workerd (the Cloudflare Workers
 * runtime), each a real runtime running the built packages (issue 22). The cases and their assertions are those of
 * the Node matrix (test/http: behaviour, composition, policies, callbacks, concurrency-disconnect): headers
 * (draft-6/7/8/11), the 429 body and Retry-After, key and limit functions, rules per request, penalties, allow and
 * deny lists, concurrency (slots held while a handler runs after its client left), settle, skipFailedRequests,
 * shadow, the failure policy on a failing store, limiters composed on one app and one store, per-route limits
 * and the observer; on memory and on Redis (ioredis). The cluster clients (ioredis and node-redis against the
 * 3-master Cluster), node-redis standalone, and SyncedStore run the core of it.
 *
 * One process per runtime serves every app of the file: the test names a scenario (suite-scenarios.ts builds its
 * options, functions included), the app gets a port of its own, and time is the app's driven clock, moved
 * through the control port. Requests go from here (supertest) to 127.0.0.1.
 *
 * workerd: one Worker (suite-worker.ts, bundled as wrangler bundles it, no compatibility flag) in one miniflare
 * instance serves the same apps under `/app/<id>`, on MemoryStore and DurableObjectStore instead of Redis (its
 * clients need `nodejs_compat`). A Worker's request has no abort signal without a compatibility flag, so the two
 * cases about clients that disconnect give way there to one saying what happens instead; the refunds of
 * skipFailedRequests are also checked to go through `executionCtx.waitUntil`.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { Miniflare } from 'miniflare'
import { parseList } from 'structured-headers'
import request from 'supertest'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { open, until } from '../support/connections.js'
import { redisEnvironment } from '../support/redis.js'
import { RUNTIMES, type Runtime, runtimeProject } from './project.js'
import { bundleWorker, COMPATIBILITY_DATE } from './workerd-support.js'

let project: Awaited<ReturnType<typeof runtimeProject>> | undefined
beforeAll(async () => {
  project = await runtimeProject(['suite-app.ts'], [], ['core', 'hono', 'cloudflare'])
}, 120_000)
afterAll(() => project?.remove())

/** A started app: its base URL, and the control of its clock, records and parked requests. */
interface RemoteApp {
  url: string
  advance(ms: number): Promise<void>
  record(): Promise<{
    decisions: Decision[]
    errors: { message: string; code: string | null; context: unknown }[]
    calls: number
    work: { started: number; running: number; peak: number; aborted: number }
    /** workerd only: the work handed to `executionCtx.waitUntil`, and how much of it settled. */
    deferred?: number
    settled?: number
  }>
  /** Lets the GET /work handlers answer. */
  finish(): Promise<void>
  held(): Promise<number>
  release(): Promise<void>
}

interface Decision {
  outcome: string
  route: string | null
  limiter: string
  rule: string | null
  allowed: boolean
  shadow: boolean
  rulesAllowed: boolean[]
}

const statuses = async (url: string, times: number, headers: Record<string, string> = {}, path = '/') => {
  const codes: number[] = []
  for (let i = 0; i < times; i++) codes.push((await request(url).get(path).set(headers)).status)
  return codes
}
const from = (ip: string) => ({ 'x-forwarded-for': ip })

/** The runtime process: started before the file's tests of that runtime, asked to exit after them. */
function runtimeProcess(runtime: Runtime) {
  let child: ChildProcess | undefined
  let control = ''
  let output = ''
  const started: string[] = []

  beforeAll(async () => {
    const { standalonePort, clusterNodes } = redisEnvironment()
    const [command, ...args] = RUNTIMES[runtime]
    child = spawn(command, [...args, 'suite-app.mjs'], {
      cwd: project!.dir,
      env: {
        ...process.env,
        REDIS_PORT: String(standalonePort),
        CLUSTER_NODES: JSON.stringify(clusterNodes),
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child.stderr!.on('data', (chunk) => {
      output += chunk
    })
    const lines = createInterface({ input: child.stdout! })
    const first = await Promise.race([
      once(lines, 'line').then(([line]) => line as string),
      once(child, 'exit').then(() => {
        throw new Error(`${runtime} exited before listening:\n${output}`)
      }),
    ])
    const { runtime: name, port } = JSON.parse(first) as { runtime: string; port: number }
    expect(name).toBe(runtime.toLowerCase())
    control = `http://127.0.0.1:${port}`
  }, 60_000)

  afterEach(async () => {
    for (const id of started.splice(0)) await fetch(`${control}/close/${id}`, { method: 'POST' })
  })

  afterAll(async () => {
    if (child === undefined || child.exitCode !== null) return
    const exited = once(child, 'exit')
    await fetch(`${control}/exit`, { method: 'POST' }).catch(() => child!.kill())
    const timer = setTimeout(() => child!.kill(), 5_000)
    await exited
    clearTimeout(timer)
  })

  return starter(
    () => control,
    () => output,
    (id) => started.push(id),
  )
}

type Start = (scenario: string, store: string, clock?: number) => Promise<RemoteApp>

/**
 * Starts scenario `scenario` of suite-scenarios.ts on `store`, its clock at `clock` (epoch ms), through the control
 * app at `control()`: the app is at its own port (Node, Bun, Deno) or under its path (workerd).
 */
function starter(control: () => string, output: () => string, started: (id: string) => void): Start {
  return async (scenario, store, clock) => {
    const response = await fetch(`${control()}/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ scenario, store, clock }),
    })
    const body = (await response.json()) as { id: string; port?: number; path?: string; error?: string }
    if (!response.ok) throw new Error(`${scenario} on ${store}: ${body.error}\n${output()}`)
    started(body.id)
    const call = async (method: string, path: string) => {
      const answer = await fetch(`${control()}/${path}/${body.id}`, { method })
      if (!answer.ok) throw new Error(`${path}: ${answer.status} ${await answer.text()}`)
      return answer.json()
    }
    return {
      url: body.path === undefined ? `http://127.0.0.1:${body.port}` : `${control()}${body.path}`,
      advance: async (ms) => {
        const answer = await fetch(`${control()}/advance/${body.id}?ms=${ms}`, { method: 'POST' })
        if (!answer.ok) throw new Error(`advance: ${answer.status}`)
      },
      record: () => call('GET', 'record') as ReturnType<RemoteApp['record']>,
      held: async () => ((await call('GET', 'held')) as { held: number }).held,
      release: async () => void (await call('POST', 'release')),
      finish: async () => void (await call('POST', 'finish')),
    }
  }
}

/**
 * workerd (the Cloudflare Workers runtime, from npm with miniflare): suite-worker.ts bundled from the built packages
 * as wrangler bundles a Worker, with no compatibility flag, RateLimiterObject bound as RATE_LIMITER (SQLite-backed).
 * One miniflare instance for the file; requests go to its URL on 127.0.0.1.
 */
function workerdRuntime(): Start {
  let mf: Miniflare | undefined
  let control = ''
  const started: string[] = []

  beforeAll(async () => {
    const worker = await bundleWorker(join(import.meta.dirname, 'suite-worker.ts'), project!.dir, [
      'suite-scenarios.ts',
      '../support/hono-app.ts',
      '../support/parked.ts',
    ])
    mf = new Miniflare({
      modules: [{ type: 'ESModule', path: 'worker.js', contents: worker }],
      compatibilityDate: COMPATIBILITY_DATE,
      compatibilityFlags: [],
      durableObjects: { RATE_LIMITER: { className: 'RateLimiterObject', useSQLite: true } },
      host: '127.0.0.1',
      port: 0,
    })
    control = (await mf.ready).origin
    // What answers is the Workers runtime, not Node.
    expect(await (await fetch(`${control}/runtime`)).json()).toEqual({ userAgent: 'Cloudflare-Workers' })
  }, 60_000)

  afterEach(async () => {
    for (const id of started.splice(0)) await fetch(`${control}/close/${id}`, { method: 'POST' })
  })

  afterAll(async () => {
    await mf?.dispose()
  })

  return starter(
    () => control,
    () => '',
    (id) => started.push(id),
  )
}

/** Resolves once `count` requests are parked in GET /hold (bounded: fails after 5 s). */
async function waitForHeld(app: RemoteApp, count: number): Promise<void> {
  let held = 0
  await until(
    async () => {
      held = await app.held()
      return held >= count
    },
    () => `${count} requests are parked in GET /hold (${held} are)`,
    { every: 10 },
  )
}

/** The stores of the whole suite: memory, and RedisStore over ioredis on the suite's redis-server. */
const STORES = [
  ['memory', 'memory'],
  ['Redis (ioredis)', 'ioredis'],
] as const

/**
 * The stores of the whole suite on workerd: memory (per isolate; one Worker is one isolate), and the Durable Object
 * store. No Redis: its clients need TCP sockets, which Workers have only with `nodejs_compat`.
 */
const WORKERD_STORES = [
  ['memory', 'memory'],
  ['Durable Object', 'durable-object'],
] as const

/**
 * The other Redis clients and SyncedStore: node-redis standalone, ioredis and node-redis against the 3-master
 * Cluster, and SyncedStore (over ioredis), on the cases where a store's part differs (headers, limits, time,
 * composition on one store, concurrency slots, reset).
 */
const MORE_STORES = [
  ['Redis (node-redis)', 'node-redis'],
  ['Redis Cluster (ioredis)', 'ioredis-cluster'],
  ['Redis Cluster (node-redis)', 'node-redis-cluster'],
  ['SyncedStore (ioredis)', 'synced'],
] as const

describe.each([...(Object.keys(RUNTIMES) as Runtime[]), 'workerd'] as const)('Hono 4 on %s', (runtime) => {
  const workerd = runtime === 'workerd'
  const start = workerd ? workerdRuntime() : runtimeProcess(runtime)

  /** Cases whose store part differs by store: every store runs them. */
  const storeCases = (store: string) => {
    it('admits the limit, then answers 429 with truthful draft-6 headers and a JSON body; the observer sees each decision', async () => {
      const app = await start('draft-6', store, 1_700_000_080_000) // 40 s into a minute
      const first = await request(app.url).get('/').expect(200, 'ok')
      expect(first.headers).toMatchObject({
        'ratelimit-policy': '2;w=60',
        'ratelimit-limit': '2',
        'ratelimit-remaining': '1',
        'ratelimit-reset': '20',
      })
      expect(first.headers['retry-after']).toBeUndefined()
      await request(app.url).get('/').expect(200)
      await app.advance(500)
      const denied = await request(app.url).get('/').expect(429)
      expect(denied.headers['retry-after']).toBe('20') // 19.5 s rounded up
      expect(denied.headers['ratelimit-reset']).toBe('20')
      expect(denied.headers['ratelimit-remaining']).toBe('0')
      expect(denied.headers['content-type']).toMatch(/^application\/json/)
      expect(denied.body).toEqual({
        error: 'Too Many Requests',
        message: 'Too many requests: retry in 20 seconds.',
        retryAfter: 20,
      })
      await app.advance(19_500)
      await request(app.url).get('/').expect(200)
      const { decisions } = await app.record()
      expect(decisions.map((decision) => decision.outcome)).toEqual([
        'allowed',
        'allowed',
        'limited',
        'allowed',
      ])
    })

    it('keeps a global and a per-route limiter on one store apart', async () => {
      const { url } = await start('global-and-route', store)
      expect(await statuses(url, 3)).toEqual([200, 200, 200])
      expect(await statuses(url, 4, {}, '/login')).toEqual([200, 200, 200, 429])
      expect((await request(url).get('/').expect(200)).headers['ratelimit-limit']).toBe('10')
    })

    if (store === 'synced') {
      // SyncedStore holds no leases: `concurrency` refuses it when the middleware is made (docs/policies.md).
      it('concurrency refuses a SyncedStore when the middleware is made, naming the option', async () => {
        await expect(start('concurrency', store)).rejects.toThrow(/`concurrency` must be a store with leases/)
      })
    } else
      it('concurrency: at most N in flight, draft-11 headers with qu="concurrent-requests", slots back when responses end', async () => {
        const app = await start('concurrency', store)
        const parked = [request(app.url).get('/hold'), request(app.url).get('/hold')].map((pending) =>
          pending.then((response) => response),
        )
        await waitForHeld(app, 2)
        const denied = await request(app.url).get('/').expect(429)
        expect(denied.headers['retry-after']).toBe('1')
        expect(denied.headers['ratelimit']).toBe('"concurrency";r=0')
        expect(denied.headers['ratelimit-policy']).toBe(
          '"100-per-1m";q=100;w=60, "concurrency";q=2;qu="concurrent-requests"',
        )
        await app.release()
        for (const response of await Promise.all(parked)) expect(response.status).toBe(200)
        const served = await request(app.url).get('/').expect(200)
        // The denied request's rate limit charge was given back: 3 served so far.
        expect(served.headers['ratelimit']).toBe('"100-per-1m";r=97;t=60, "concurrency";r=1')
      })

    it("resets one key through the handle, and the requesting client's own key", async () => {
      const { url } = await start('reset-by-key', store)
      expect(await statuses(url, 3, { 'x-user': 'ann' })).toEqual([200, 200, 429])
      expect(await statuses(url, 3, { 'x-user': 'bob' })).toEqual([200, 200, 429])
      await request(url).post('/reset/ann').expect(200)
      expect(await statuses(url, 3, { 'x-user': 'ann' })).toEqual([200, 200, 429])
      expect(await statuses(url, 1, { 'x-user': 'bob' })).toEqual([429])
      const me = await start('reset-me', store)
      const client = from('203.0.113.9')
      expect(await statuses(me.url, 2, client)).toEqual([200, 429])
      expect(await statuses(me.url, 1, from('203.0.113.10'))).toEqual([200])
      await request(me.url).post('/reset-me').set(client).expect(200)
      expect(await statuses(me.url, 2, client)).toEqual([200, 429])
      expect(await statuses(me.url, 1, from('203.0.113.10'))).toEqual([429])
    })
  }

  const stores: readonly (readonly [string, string])[] = workerd ? WORKERD_STORES : STORES
  describe.each(stores)('with the %s store', (_, store) => {
    storeCases(store)

    it('groups IPv6 clients by /56 and keeps neighbouring prefixes apart', async () => {
      const { url } = await start('one-per-client', store)
      await request(url).get('/').set(from('2001:db8:1:100::1')).expect(200)
      await request(url).get('/').set(from('2001:db8:1:1ff:abcd::2')).expect(429)
      await request(url).get('/').set(from('2001:db8:1:200::1')).expect(200)
      await request(url).get('/').set(from('::ffff:198.51.100.7')).expect(200)
      await request(url).get('/').set(from('198.51.100.7')).expect(429)
    })

    it('shadow limiter: every request passes, without RateLimit headers, reported as shadow-limited with its route', async () => {
      const app = await start('shadow-route', store, 1_700_000_080_000)
      for (let i = 0; i < 4; i++) {
        const response = await request(app.url).get('/limited').expect(200, 'limited route')
        expect(response.headers['ratelimit-limit']).toBeUndefined()
        expect(response.headers['ratelimit-policy']).toBeUndefined()
        expect(response.headers['retry-after']).toBeUndefined()
      }
      const { decisions } = await app.record()
      expect(decisions.map((decision) => decision.outcome)).toEqual([
        'allowed',
        'allowed',
        'shadow-limited',
        'shadow-limited',
      ])
      expect(decisions[3]).toMatchObject({ allowed: true, shadow: true, rulesAllowed: [false] })
      expect(new Set(decisions.map((decision) => decision.route))).toEqual(new Set(['/limited']))
      expect(new Set(decisions.map((decision) => decision.limiter))).toEqual(new Set(['shadowed']))
    })

    it('shadow rule next to an enforcing one: headers describe the enforcing rule only', async () => {
      const app = await start('shadow-rule', store, 1_699_999_200_000) // the start of an hour
      const passed = []
      for (let i = 0; i < 3; i++) passed.push(await request(app.url).get('/').expect(200))
      expect(passed.map((response) => response.headers['ratelimit'])).toEqual([
        '"hourly";r=2;t=3600',
        '"hourly";r=1;t=3600',
        '"hourly";r=0;t=3600',
      ])
      expect(passed[1]!.headers['ratelimit-policy']).toBe('"hourly";q=3;w=3600')
      const denied = await request(app.url).get('/').expect(429)
      expect(parseList(denied.headers['ratelimit'] ?? '').map(([name]) => name)).toEqual(['hourly'])
      const { decisions } = await app.record()
      expect(decisions.map((decision) => `${decision.outcome}:${decision.rule}`)).toEqual([
        'allowed:hourly',
        'shadow-limited:burst',
        'shadow-limited:burst',
        'limited:hourly',
      ])
    })

    it('penalty: repeated denials block the client with the configured status and a truthful Retry-After', async () => {
      const app = await start('penalty', store, 1_700_000_000_000)
      const { url } = app
      await request(url).get('/').expect(200)
      expect((await request(url).get('/').expect(429)).headers['retry-after']).toBe('1')
      const blocked = await request(url).get('/').expect(403)
      expect(blocked.headers['retry-after']).toBe('30')
      expect(blocked.body).toEqual({
        error: 'Forbidden',
        message: 'Blocked after repeated rate limit violations: retry in 30 seconds.',
        retryAfter: 30,
        blocked: true,
      })
      await app.advance(10_500) // the window has long rolled over; the block has 19.5 s left
      const still = await request(url).get('/').expect(403)
      expect(still.headers['retry-after']).toBe('20')
      expect(still.headers['ratelimit-remaining']).toBe('0')
      await request(url).get('/').set(from('198.51.100.9')).expect(200) // another client is not blocked
      await app.advance(19_500)
      await request(url).get('/').expect(200)
      await request(url).get('/').expect(429)
      expect((await request(url).get('/').expect(403)).headers['retry-after']).toBe('60') // twice as long
      const outcomes = (await app.record()).decisions.map((decision) => decision.outcome)
      expect(outcomes.slice(0, 4)).toEqual(['allowed', 'limited', 'blocked', 'blocked'])
    })

    it('reserve-then-settle: c.get("rateLimit").settle(actual) refunds an overestimate and charges an underestimate in full', async () => {
      const { url } = await start('settle', store)
      const first = await request(url).get('/settle?n=4').expect(200)
      expect(first.body).toEqual({ charged: 0, refunded: 6, uncharged: 0 })
      expect(first.headers['ratelimit-remaining']).toBe('96')
      expect((await request(url).get('/state').expect(200)).body).toMatchObject({ remaining: 86 })
      const second = await request(url).get('/settle?n=50').expect(200)
      expect(second.body).toEqual({ charged: 40, refunded: 0, uncharged: 0 })
      expect(second.headers['ratelimit-remaining']).toBe('36')
      expect((await request(url).get('/state').expect(200)).body).toMatchObject({ remaining: 26 })
      // 90 more charged in full, 74 past the limit: owed (within `maxDebt`, one limit by default).
      expect((await request(url).get('/settle?n=100').expect(200)).body).toEqual({
        charged: 90,
        refunded: 0,
        uncharged: 0,
      })
      expect((await request(url).get('/').expect(429)).headers['ratelimit-remaining']).toBe('0')
    })

    // A Worker's request has no abort signal without a compatibility flag (`enable_request_signal`): the
    // middleware never hears that a client left. In workerd the handler keeps running, and its slot comes back
    // when it returns, as without `releaseOnClose`.
    if (workerd)
      it('concurrency on Workers: `releaseOnClose` cannot see a client leave; the slot comes back when its handler returns', async () => {
        const app = await start('release-on-close', store)
        const controller = new AbortController()
        const aborted = fetch(`${app.url}/hold`, { signal: controller.signal }).catch(() => 'aborted')
        await waitForHeld(app, 1)
        await request(app.url).get('/').expect(429)
        controller.abort()
        expect(await aborted).toBe('aborted')
        await request(app.url).get('/').expect(429)
        expect(await app.held()).toBe(1) // the handler still runs, for a client long gone
        await app.release()
        await until(async () => (await request(app.url).get('/')).status === 200, 'the slot came back')
      })
    else {
      it('concurrency with `releaseOnClose`: a client that closes the connection gives its slot back', async () => {
        const app = await start('release-on-close', store)
        const controller = new AbortController()
        const aborted = fetch(`${app.url}/hold`, { signal: controller.signal }).catch(() => 'aborted')
        await waitForHeld(app, 1)
        await request(app.url).get('/').expect(429)
        controller.abort()
        expect(await aborted).toBe('aborted')
        let status = 0
        await until(
          async () => {
            status = (await request(app.url).get('/')).status
            return status === 200
          },
          'the closed connection gives its slot back (GET / answers 200)',
          { every: 10 },
        )
        expect(status).toBe(200)
      })

      it('clients that disconnect while their handlers run never get more than `limit` handlers at once; a handler that returns frees its slot', async () => {
        const app = await start('concurrency-work', store)
        for (let round = 0; round < 3; round++) {
          const { started } = (await app.record()).work
          const clients = Array.from({ length: 10 }, () => open(`${app.url}/work`))
          await until(
            async () =>
              clients.filter((client) => client.status !== undefined).length +
                (await app.record()).work.started -
                started ===
              10,
            'every request of the round was decided',
          )
          for (const client of clients) client.close()
          // The server has seen every client of a running handler go (the request's signal aborted).
          await until(async () => {
            const { work } = await app.record()
            return work.aborted === work.started
          }, 'the server saw the clients go')
        }
        // Before issue 19's fix each round's disconnects freed the slots: 2 more handlers per round.
        expect((await app.record()).work).toMatchObject({ peak: 2, running: 2, started: 2 })
        await request(app.url).get('/').expect(429)
        await app.finish() // the handlers return, to clients long gone: their slots come back
        await until(async () => (await request(app.url).get('/')).status === 200, 'a slot came back')
      })
    }

    it('checks several rules at once, all-or-nothing', async () => {
      const app = await start('several-rules', store, 1_699_999_200_000)
      await request(app.url).get('/').expect(200)
      const second = await request(app.url).get('/').expect(200)
      expect(second.headers['ratelimit-remaining']).toBe('0')
      expect(second.headers['ratelimit-policy']).toBe('2;w=2, 3;w=3600')
      expect((await request(app.url).get('/').expect(429)).headers['retry-after']).toBe('1')
      await app.advance(1_000)
      expect((await request(app.url).get('/').expect(200)).headers['ratelimit-limit']).toBe('3')
      await app.advance(5_000)
      expect((await request(app.url).get('/').expect(429)).headers['retry-after']).toBe('3594')
    })

    it('draft-11: names every policy, and on a denial only those that block', async () => {
      const app = await start('draft-11', store, 1_699_999_200_000)
      const first = await request(app.url).get('/').expect(200)
      expect(first.headers['ratelimit-policy']).toBe('"burst";q=2;w=10, "hourly";q=100;w=3600')
      expect(first.headers['ratelimit']).toBe('"burst";r=1;t=10, "hourly";r=99;t=3600')
      await app.advance(4_000)
      const second = await request(app.url).get('/').expect(200)
      expect(second.headers['ratelimit']).toBe('"burst";r=0;t=10, "hourly";r=98;t=3596')
      await app.advance(1_000)
      const denied = await request(app.url).get('/').expect(429)
      expect(denied.headers['ratelimit']).toBe('"burst";r=0;t=5')
      expect(denied.headers['retry-after']).toBe('5')
    })

    it('writes draft-7, draft-8 (with a keyed partition key), legacy, or no headers', async () => {
      let { url } = await start('draft-7-legacy', store)
      const draft7 = await request(url).get('/').expect(200)
      expect(draft7.headers['ratelimit']).toMatch(/^limit=5, remaining=4, reset=\d+$/)
      expect(draft7.headers['ratelimit-policy']).toBe('5;w=60')
      expect(draft7.headers['x-ratelimit-limit']).toBe('5')
      expect(draft7.headers['x-ratelimit-remaining']).toBe('4')
      expect(Number(draft7.headers['x-ratelimit-reset'])).toBeGreaterThan(1_700_000_000) // epoch seconds
      ;({ url } = await start('draft-8', store))
      const draft8 = await request(url).get('/').expect(200)
      expect(draft8.headers['ratelimit-policy']).toMatch(/^"5-per-1m";q=5;w=60;pk=:[A-Za-z0-9+/]{16}:$/)
      expect(draft8.headers['ratelimit']).toMatch(/^"5-per-1m";r=4;t=\d+;pk=:[A-Za-z0-9+/]{16}:$/)
      expect(JSON.stringify(draft8.headers)).not.toContain('127.0.0.1')
      ;({ url } = await start('no-headers', store))
      const none = await request(url).get('/').expect(200)
      expect(Object.keys(none.headers).filter((name) => name.includes('ratelimit'))).toEqual([])
      expect((await request(url).get('/').expect(429)).headers['retry-after']).toMatch(/^\d+$/)
    })

    it('answers with problem details, a text or function `message`, and `statusCode`', async () => {
      let { url } = await start('problem-details', store)
      await request(url).get('/')
      const problem = await request(url).get('/').expect(429)
      expect(problem.headers['content-type']).toMatch(/^application\/problem\+json/)
      expect(JSON.parse(problem.text)).toMatchObject({
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        status: 429,
        'violated-policies': ['1-per-1m'],
      })
      ;({ url } = await start('message-text', store))
      await request(url).get('/')
      const text = await request(url).get('/').expect(503)
      expect(text.text).toBe('slow down')
      expect(text.headers['content-type']).toMatch(/^text\/plain/)
      ;({ url } = await start('message-function', store))
      await request(url).get('/')
      expect((await request(url).get('/').expect(429)).body).toEqual({ wait: true })
    })

    it('skip, cost per request, and `limit` and `key` as functions of the context', async () => {
      let { url } = await start('skip', store)
      expect(await statuses(url, 2, { 'x-internal': 'yes' })).toEqual([200, 200])
      expect(await statuses(url, 2)).toEqual([200, 429])
      ;({ url } = await start('cost-per-request', store))
      const costly = await request(url).get('/').set('X-Cost', '4').expect(200)
      expect(costly.headers['ratelimit-remaining']).toBe('1')
      await request(url).get('/').set('X-Cost', '2').expect(429)
      await request(url).get('/').expect(200)
      ;({ url } = await start('limit-and-key-functions', store))
      expect(await statuses(url, 2, { 'x-user': 'free-user' })).toEqual([200, 429])
      expect(await statuses(url, 4, { 'x-user': 'pro-user', 'x-plan': 'pro' })).toEqual([200, 200, 200, 429])
    })

    it('skipFailedRequests gives back requests that failed; skipSuccessfulRequests those that passed', async () => {
      const failed = await start('skip-failed', store)
      let { url } = failed
      expect(await statuses(url, 4, {}, '/fail')).toEqual([500, 500, 500, 500])
      expect(await statuses(url, 3)).toEqual([200, 200, 429])
      // On Workers the refunds, made after the response, went through executionCtx.waitUntil, and completed.
      if (workerd) expect(await failed.record()).toMatchObject({ deferred: 4, settled: 4 })
      ;({ url } = await start('skip-successful', store))
      expect(await statuses(url, 4)).toEqual([200, 200, 200, 200])
      expect(await statuses(url, 3, {}, '/fail')).toEqual([500, 500, 429])
    })

    it('slowDown(): delays after delayAfter by delayMs(used), at most maxDelayMs; skipFailedRequests gives failed ones back', async () => {
      const slowed = await start('slow-down', store)
      const infos = []
      for (let i = 0; i < 5; i++) infos.push((await request(slowed.url).get('/slow').expect(200)).body)
      expect(infos.map((info) => [info.used, info.delay])).toEqual([
        [1, 0],
        [2, 0],
        [3, 100],
        [4, 200],
        [5, 250],
      ])
      expect(infos[4]).toMatchObject({ limit: 2, remaining: 0, key: '127.0.0.1' })
      const { decisions } = await slowed.record()
      expect(decisions.map((decision) => decision.outcome)).toEqual([
        'allowed',
        'allowed',
        'delayed',
        'delayed',
        'delayed',
      ])
      const failing = await start('slow-down-skip-failed', store)
      expect(await statuses(failing.url, 3, {}, '/slow-fail')).toEqual([500, 500, 500])
      const next = (await request(failing.url).get('/slow').expect(200)).body
      expect([next.used, next.delay]).toEqual([1, 0])
      // On Workers the refunds, made after the response, went through executionCtx.waitUntil, and completed.
      if (workerd) expect(await failing.record()).toMatchObject({ deferred: 3, settled: 3 })
    })

    it('`requestWasSuccessful` that throws: the response stands, the request counts, onError hears of it', async () => {
      const app = await start('success-check-throws', store)
      expect(await statuses(app.url, 2, {}, '/fail')).toEqual([500, 500])
      await request(app.url).get('/').expect(429) // both counted: no refund without a verdict
      const { errors } = await app.record()
      expect(errors.map((error) => error.code)).toEqual(['CALLBACK_FAILED', 'CALLBACK_FAILED'])
    })

    it('limits one route on its own, and exposes the result on the context', async () => {
      let { url } = await start('route-limit', store)
      expect(await statuses(url, 2, {}, '/limited')).toEqual([200, 429])
      expect(await statuses(url, 3)).toEqual([200, 200, 200])
      ;({ url } = await start('state', store))
      const { body } = await request(url).get('/state').expect(200)
      expect(body).toMatchObject({
        allowed: true,
        limit: 3,
        remaining: 2,
        key: '127.0.0.1',
        source: 'store',
      })
    })

    it('passes a key failure to Hono error handling, and keeps serving', async () => {
      const { url } = await start('key-throws', store)
      expect((await request(url).get('/').expect(500)).body).toEqual({ error: 'NO_KEY' })
      expect((await request(url).get('/').expect(500)).body).toEqual({ error: 'NO_KEY' })
    })

    it('shares one budget across the routes of a named group; keeps different rules apart on one store', async () => {
      let { url } = await start('group', store)
      expect([
        ...(await statuses(url, 1, {}, '/a')),
        ...(await statuses(url, 1, {}, '/b')),
        ...(await statuses(url, 1, {}, '/c')),
      ]).toEqual([200, 200, 200])
      expect(await statuses(url, 1, {}, '/a')).toEqual([429])
      expect(await statuses(url, 2)).toEqual([200, 200])
      ;({ url } = await start('rules-apart', store))
      expect(await statuses(url, 3, {}, '/a')).toEqual([200, 200, 429])
      expect(await statuses(url, 3, {}, '/b')).toEqual([200, 200, 429])
    })

    it("labels a route limiter's decisions with its route pattern, a global one's with none", async () => {
      const app = await start('route-labels', store)
      await request(app.url).get('/a').expect(200)
      const { decisions } = await app.record()
      expect(decisions.map((decision) => [decision.limiter, decision.route])).toEqual([
        ['global', null],
        ['a', '/a'],
      ])
    })

    it('answers deny-listed clients 403 and lets allow-listed ones through, with no store call', async () => {
      const app = await start('lists', store)
      const { url } = app
      const denied = await request(url).get('/').set(from('198.51.100.7')).expect(403)
      expect(denied.body).toEqual({ error: 'Forbidden', message: 'Access denied.' })
      expect(denied.headers['ratelimit-limit']).toBeUndefined()
      expect(await statuses(url, 1, from('2001:db8:bad:1::9'))).toEqual([403])
      expect(await statuses(url, 3, from('10.1.2.3'))).toEqual([200, 200, 200])
      expect((await app.record()).calls).toBe(0)
      expect(await statuses(url, 2, from('203.0.113.1'))).toEqual([200, 429])
      expect((await app.record()).calls).toBe(2)
    })

    it('denyList as a function of the context; deny wins over skip and the allow list', async () => {
      const app = await start('deny-function', store)
      const { url } = app
      expect(await statuses(url, 1, { 'x-bot': 'yes' })).toEqual([403])
      expect(await statuses(url, 1, { 'x-bot': 'yes', 'x-internal': 'yes' })).toEqual([403])
      expect(await statuses(url, 1, { 'x-bot': 'yes', ...from('10.1.2.3') })).toEqual([403])
      expect((await app.record()).calls).toBe(0)
      expect(await statuses(url, 2, { 'x-internal': 'yes' })).toEqual([200, 200])
      expect(await statuses(url, 2, from('203.0.113.1'))).toEqual([200, 429])
    })

    it("applies each request's plan (rules per request), and resets a key in every rule set", async () => {
      const { url } = await start('plans', store)
      const as = (user: string, plan: string) => ({ 'x-user': user, 'x-plan': plan })
      expect(await statuses(url, 3, as('ann', 'free'))).toEqual([200, 200, 429])
      expect(await statuses(url, 5, as('bob', 'pro'))).toEqual([200, 200, 200, 200, 429])
      expect(await statuses(url, 3, as('cy', 'batch'))).toEqual([200, 200, 429])
      expect((await request(url).get('/').set(as('dee', 'free'))).headers['ratelimit-limit']).toBe('2')
      expect((await request(url).get('/').set(as('dee', 'pro'))).headers['ratelimit-limit']).toBe('4')
      await request(url).post('/reset/ann').expect(200)
      await request(url).post('/reset/cy').expect(200)
      expect(await statuses(url, 1, as('ann', 'free'))).toEqual([200])
      expect(await statuses(url, 1, as('cy', 'batch'))).toEqual([200])
    })

    it('hands a throwing or wrong rules resolver to Hono error handling, per request', async () => {
      const { url } = await start('resolver-throws', store)
      expect((await request(url).get('/').set('x-plan', 'boom').expect(500)).body).toEqual({
        error: 'plan lookup failed',
      })
      expect((await request(url).get('/').set('x-plan', 'bad').expect(500)).body).toEqual({
        error: 'ERR_RATEWINDOW_INVALID_OPTION',
      })
      expect(await statuses(url, 3)).toEqual([200, 200, 429])
    })
  })

  if (!workerd)
    describe.each(MORE_STORES)('with the %s store', (_, store) => {
      storeCases(store)
    })

  it('refuses bad options when the middleware is made, naming them: a ported configuration in one error', async () => {
    const ported = await start('ported-options', 'memory').catch((error: Error) => error)
    expect(ported).toBeInstanceOf(Error)
    const message = (ported as Error).message
    expect(message).toMatch(/5 unknown options in .* options:/)
    for (const hint of ['`window`', '`limit: 100`', '`headers:', '`key:', 'Did you mean `limit`?'])
      expect(message).toContain(hint)
    await expect(start('bad-window', 'memory')).rejects.toThrow(/`window`/)
  })

  describe('with a failing store', () => {
    it('fails open by default, without invented headers, and reports the failure', async () => {
      const app = await start('fail-open', 'failing')
      const response = await request(app.url).get('/').expect(200, 'ok')
      expect(response.headers['ratelimit-limit']).toBeUndefined()
      expect((await app.record()).errors).toEqual([
        {
          message: 'connection refused',
          code: null,
          context: { operation: 'consume', key: '127.0.0.1', limiter: expect.any(String) },
        },
      ])
    })

    it('fails closed with 503 and Retry-After when onStoreError is deny', async () => {
      const { url } = await start('fail-closed', 'failing')
      const response = await request(url).get('/').expect(503)
      expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    })
  })
})
