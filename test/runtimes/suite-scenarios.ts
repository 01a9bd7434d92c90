/**
 * The Hono test apps of the HTTP suite on other runtimes (test/runtimes/hono-suite.test.ts), shared by the two
 * programs that serve them: suite-app.ts (one process per runtime: Node with `@hono/node-server`, Bun, Deno; each
 * app on a port of its own) and suite-worker.ts (one Worker in workerd; each app under the path `/app/<id>`).
 * Options with functions cannot cross a process boundary, so the apps are named here: each scenario builds the
 * options of one Hono test app from a store, a driven clock and an observer that records.
 *
 * The control app (`suiteControl`), all JSON:
 * - `POST /start {scenario, store, clock?}`: builds the app and serves it; answers `{id}` and where it is served
 *   (`port`, or `path`). The store is made by the program (memory, Redis, Durable Objects, `failing`); the clock
 *   starts at `clock` (epoch ms).
 * - `POST /advance/:id?ms=`: moves that app's clock; `GET /record/:id`: its decisions, store errors, store
 *   calls and GET /work handlers; `GET /held/:id`, `POST /release/:id`: requests parked in GET /hold;
 *   `POST /finish/:id`: lets the GET /work handlers answer; `POST /close/:id`.
 *
 * App routes: those of test/http/harness.ts's Hono app, from the same builder (test/support/hono-app.ts), with the
 * scenario's limiters on them. The client address is the runtime's (`getConnInfo`), and X-Forwarded-For from
 * 127.0.0.1 (`trustProxy`), as the Node matrix trusts one local proxy.
 */
import type { DecisionEvent, Store } from '@ratewindow/core'
import {
  AccessList,
  fixedWindow,
  type HonoRateLimitOptions,
  type HonoSlowDownOptions,
  type RateLimitMiddleware,
  rateLimit,
  slidingWindowCounter,
  slidingWindowLog,
  slowDown,
  tokenBucket,
} from '@ratewindow/hono'
import { type Context, Hono } from 'hono'
import { type HonoTestApp, honoTestApp } from '../support/hono-app.js'
import { type CountedWork, countedWork, type Park, type Parking, parking } from '../support/parked.js'

type Options = HonoRateLimitOptions
/** An app's fetch handler, as Hono's `app.fetch` (the Workers runtime passes its bindings and context). */
export type Fetch = (request: Request, env?: unknown, ctx?: unknown) => Response | Promise<Response>

/** What a scenario is given: its store (one per app), its clock, and recorders. */
interface Kit {
  store: Store
  clock: { now: number; read(): number }
  /** An observer that records every decision (GET /record/:id). */
  observer: { onDecision(event: DecisionEvent): void }
  /** An `onError` that records every store failure. */
  onError(error: unknown, context: unknown): void
  /** `store`, counting the calls that reach it (GET /record/:id). */
  counted(): Store
}

/** One test app, as test/http/harness.ts's `AppSpec`, and the routes of the other HTTP tests. */
interface Spec {
  global?: Options
  route?: Options
  routes?: Partial<Record<'/a' | '/b' | '/c' | '/login', Options>>
  shared?: Options
  /** `slowDown()` on GET /slow and /slow-fail (500); its delays run at once (see `start`), their values are checked. */
  slow?: HonoSlowDownOptions
}

const header = (c: unknown, name: string) => (c as Context).req.header(name)
const PLANS = {
  free: fixedWindow({ limit: 2, window: '1m' }),
  pro: [slidingWindowCounter({ limit: 4, window: '10s' }), fixedWindow({ limit: 100, window: '1h' })],
  batch: { rules: tokenBucket({ capacity: 6, refillRate: 1, interval: '1m' }), cost: 3 },
} as const
const byUser = (c: unknown) => header(c, 'x-user') ?? 'anonymous'

/** The apps the suite starts, by name (the test of the same name says what each must do). */
export const SCENARIOS: Record<string, (kit: Kit) => Spec> = {
  'draft-6': ({ store, observer }) => ({
    global: { limit: 2, window: '1m', algorithm: 'fixed-window', store, observer },
  }),
  // slowDown(): express-slow-down's model (issue 24), on the runtime's timers and refunds (waitUntil on Workers).
  'slow-down': ({ store, observer }) => ({
    slow: {
      windowMs: 60_000,
      delayAfter: 2,
      delayMs: (used) => (used - 2) * 100,
      maxDelayMs: 250,
      store,
      observer,
    },
  }),
  'slow-down-skip-failed': ({ store }) => ({
    slow: { windowMs: 60_000, delayAfter: 1, delayMs: 100, skipFailedRequests: true, store },
  }),
  'one-per-client': ({ store }) => ({ global: { limit: 1, store } }),
  'shadow-route': ({ store, observer }) => ({
    route: { limit: 2, window: '1m', shadow: true, name: 'shadowed', store, observer },
  }),
  'shadow-rule': ({ store, observer }) => ({
    global: {
      rules: [
        fixedWindow({ limit: 1, window: '1m', name: 'burst', shadow: true }),
        fixedWindow({ limit: 3, window: '1h', name: 'hourly' }),
      ],
      store,
      headers: 'draft-11',
      observer,
    },
  }),
  penalty: ({ store, observer }) => ({
    global: {
      limit: 1,
      window: '1s',
      algorithm: 'fixed-window',
      penalty: { after: 2, within: '10s', block: '30s', factor: 2, maxBlock: '1m', statusCode: 403 },
      store,
      observer,
    },
  }),
  settle: ({ store }) => ({
    global: { limit: 100, window: '1h', algorithm: 'fixed-window', cost: 10, store },
  }),
  concurrency: ({ store }) => ({
    global: { limit: 100, window: '1m', headers: 'draft-11', concurrency: { limit: 2, lease: '1m' }, store },
  }),
  'concurrency-work': ({ store }) => ({ global: { limit: 1_000, concurrency: { limit: 2 }, store } }),
  'release-on-close': ({ store }) => ({
    global: { limit: 100, concurrency: { limit: 1, releaseOnClose: true }, store },
  }),
  'several-rules': ({ store }) => ({
    global: {
      rules: [
        tokenBucket({ capacity: 2, refillRate: 1, interval: '1s' }),
        fixedWindow({ limit: 3, window: '1h' }),
      ],
      store,
    },
  }),
  'draft-11': ({ store }) => ({
    global: {
      rules: [
        slidingWindowLog({ limit: 2, window: '10s', name: 'burst' }),
        fixedWindow({ limit: 100, window: '1h', name: 'hourly' }),
      ],
      headers: 'draft-11',
      store,
    },
  }),
  'draft-7-legacy': ({ store }) => ({ global: { limit: 5, headers: 'draft-7', legacyHeaders: true, store } }),
  'draft-8': ({ store }) => ({
    global: {
      limit: 5,
      window: '1m',
      headers: 'draft-8',
      partitionKeySecret: 'a-server-secret-of-32-characters',
      store,
    },
  }),
  'no-headers': ({ store }) => ({ global: { limit: 1, headers: false, store } }),
  'problem-details': ({ store }) => ({ global: { limit: 1, problemDetails: true, store } }),
  'message-text': ({ store }) => ({ global: { limit: 1, message: 'slow down', statusCode: 503, store } }),
  'message-function': ({ store }) => ({
    global: { limit: 1, message: (_c, result) => ({ wait: result.retryAfter > 0 }), store },
  }),
  skip: ({ store }) => ({ global: { limit: 1, skip: (c) => header(c, 'x-internal') === 'yes', store } }),
  'cost-per-request': ({ store }) => ({
    global: { limit: 5, cost: (c) => Number(header(c, 'x-cost') ?? 1), store },
  }),
  'limit-and-key-functions': ({ store }) => ({
    global: { limit: (c) => (header(c, 'x-plan') === 'pro' ? 3 : 1), key: byUser, store },
  }),
  'skip-failed': ({ store }) => ({ global: { limit: 2, skipFailedRequests: true, store } }),
  'success-check-throws': ({ store, onError }) => ({
    global: {
      limit: 2,
      skipFailedRequests: true,
      requestWasSuccessful: () => {
        throw Object.assign(new Error('callback failed'), { code: 'CALLBACK_FAILED' })
      },
      onError,
      store,
    },
  }),
  'skip-successful': ({ store }) => ({ global: { limit: 2, skipSuccessfulRequests: true, store } }),
  'route-limit': ({ store }) => ({ route: { limit: 1, store } }),
  state: ({ store }) => ({ global: { limit: 3, store } }),
  'fail-open': ({ store, onError }) => ({ global: { limit: 1, store, onError } }),
  'fail-closed': ({ store, onError }) => ({ global: { limit: 1, store, onStoreError: 'deny', onError } }),
  'key-throws': ({ store }) => ({
    global: {
      limit: 1,
      store,
      key: () => {
        throw Object.assign(new Error('no key'), { code: 'NO_KEY' })
      },
    },
  }),
  // Bad options, refused when the middleware is made: a configuration ported from express-rate-limit, a bad window.
  'ported-options': ({ store }) => ({
    global: {
      windowMs: 15 * 60_000,
      max: 100,
      standardHeaders: 'draft-7',
      keyGenerator: () => 'k',
      limt: 3,
      store,
    } as Options,
  }),
  'bad-window': ({ store }) => ({ global: { limit: 10, window: '1x' as never, store } }),
  // Composition: two limiters on one app and one store; a named group; different rules apart.
  'global-and-route': ({ store }) => ({
    global: { limit: 10, store },
    routes: { '/login': { limit: 3, store } },
  }),
  group: ({ store }) => {
    const login = { limit: 3, window: '1m', group: 'login', store } as const
    return { routes: { '/a': login, '/b': login, '/c': login } }
  },
  'rules-apart': ({ store }) => ({
    global: { rules: tokenBucket({ capacity: 5, refillRate: 1, interval: '1m' }), store },
    routes: {
      '/a': { rules: slidingWindowLog({ limit: 2, window: '1m' }), store },
      '/b': { limit: 2, window: '30s', store },
    },
  }),
  'route-labels': ({ store, observer }) => ({
    global: { limit: 10, name: 'global', store, observer },
    routes: { '/a': { limit: 10, name: 'a', prefix: 'a', store, observer } },
  }),
  // Policies: the reset handle, allow and deny lists, rules per request.
  'reset-by-key': ({ store }) => ({ shared: { limit: 2, store, key: byUser } }),
  'reset-me': ({ store }) => ({ shared: { limit: 1, store } }),
  lists: ({ counted }) => ({
    shared: {
      limit: 1,
      store: counted(),
      allowList: new AccessList({ ips: ['10.0.0.0/8', '198.51.100.7'] }),
      denyList: new AccessList({ ips: ['198.51.100.0/24', '2001:db8:bad::/48'], keys: [] }),
    },
  }),
  'deny-function': ({ counted }) => ({
    shared: {
      limit: 1,
      store: counted(),
      denyList: async (c) => header(c, 'x-bot') === 'yes',
      skip: (c) => header(c, 'x-internal') === 'yes',
      allowList: { ips: ['10.0.0.0/8'] },
    },
  }),
  plans: ({ store }) => ({
    shared: {
      rules: (c) => PLANS[(header(c, 'x-plan') ?? 'free') as keyof typeof PLANS],
      key: byUser,
      store,
    },
  }),
  'resolver-throws': ({ store }) => ({
    shared: {
      rules: (c) => {
        if (header(c, 'x-plan') === 'boom') throw new Error('plan lookup failed')
        if (header(c, 'x-plan') === 'bad') return { limit: 5 } as never
        return PLANS.free
      },
      key: byUser,
      store,
    },
  }),
}

interface Instance {
  clock: { now: number; read(): number }
  /** GET /work's handlers: what they did, and `finish` to let them return. */
  work: CountedWork
  decisions: unknown[]
  errors: unknown[]
  calls: { count: number }
  /** Requests parked in GET /hold. */
  held: Parking
  limiters: RateLimitMiddleware[]
  slowDowns: { close(): void }[]
  close(): Promise<void>
}

/** What the program serving the apps provides. */
export interface Launcher {
  /** The runtime's `getConnInfo` helper. */
  getConnInfo: NonNullable<Options['getConnInfo']>
  /** Makes the store of one app (named by `POST /start`'s `store`), on the app's clock. */
  makeStore(kind: string, clock: () => number): Promise<Store>
  /** Serves an app: what `POST /start` answers about where it is (`{port}`, `{path}`), and how to stop it. */
  serve(fetch: Fetch, id: string): Promise<{ where: Record<string, unknown>; close(): Promise<void> }>
  /**
   * Waits, in a parked request (GET /hold, /work), for the test to let it go: `released`, which another request
   * (the control's) resolves. Unset: awaits it. workerd cancels a request that awaits nothing of its own (it would
   * "never generate a response"), so the Worker waits on a timer of the request's own until then.
   */
  park?: Park
  /** What the program records of app `id` besides the decisions (GET /record/:id): the Worker, its `waitUntil` calls. */
  record?(id: string): Record<string, unknown>
}

/** Builds the control app over `launcher`; `closeAll` closes every app still open. */
export function suiteControl(launcher: Launcher): { control: Hono; closeAll(): Promise<void> } {
  const instances = new Map<string, Instance>()
  let instanceCount = 0
  const { park } = launcher

  async function start(scenario: string, storeKind: string, clockStart: number | undefined) {
    const build = SCENARIOS[scenario]
    if (build === undefined) throw new Error(`no scenario named ${scenario}`)
    const clock = { now: clockStart ?? 1_700_000_000_000, read: () => clock.now }
    const store = await launcher.makeStore(storeKind, clock.read)
    const instance: Instance = {
      clock,
      decisions: [],
      errors: [],
      calls: { count: 0 },
      held: parking(park),
      work: countedWork(park),
      limiters: [],
      slowDowns: [],
      close: async () => {},
    }
    const counted = (): Store =>
      new Proxy(store, {
        get(target, name, receiver) {
          const value = Reflect.get(target, name, receiver)
          if (typeof value !== 'function') return value
          return (...args: unknown[]) => {
            if (name === 'consume' || name === 'peek' || name === 'reset' || name === 'refund')
              instance.calls.count++
            return value.apply(target, args)
          }
        },
      })
    const spec = build({
      store,
      clock,
      counted,
      observer: {
        onDecision: (event) =>
          void instance.decisions.push({
            outcome: event.outcome,
            route: event.route ?? null,
            limiter: event.limiter,
            rule: event.rule ?? null,
            allowed: event.result.allowed,
            shadow: event.result.shadow ?? false,
            rulesAllowed: event.result.rules.map((rule) => rule.allowed),
          }),
      },
      onError: (error, context) =>
        void instance.errors.push({
          message: (error as Error).message,
          code: (error as { code?: string }).code ?? null,
          context,
        }),
    })
    const limiter = (options: Options) => {
      const made = rateLimit({ getConnInfo: launcher.getConnInfo, trustProxy: '127.0.0.1', ...options })
      instance.limiters.push(made)
      return made
    }
    // The delays run on a timer of 0 ms whatever their length, so that the suite takes no wall time; the app's
    // driven clock is the queue's clock (the waiting itself is test/http/slow-down.test.ts's, on driven timers).
    const slowDownOf = (options: HonoSlowDownOptions) => {
      const made = slowDown({
        getConnInfo: launcher.getConnInfo,
        trustProxy: '127.0.0.1',
        timers: {
          now: clock.read,
          setTimeout: (run) => setTimeout(run, 0),
          clearTimeout: (t) => clearTimeout(t as never),
        },
        ...options,
      })
      instance.slowDowns.push(made)
      return made
    }
    const global = spec.global && limiter(spec.global)
    const shared = spec.shared && limiter(spec.shared)
    const route = spec.route && limiter(spec.route)
    const routes: HonoTestApp['routes'] = {}
    for (const path of ['/a', '/b', '/c', '/login'] as const) {
      const options = spec.routes?.[path]
      if (options) routes[path] = limiter(options)
    }
    const app = honoTestApp({
      global,
      shared,
      route,
      routes,
      slowDown: spec.slow && slowDownOf(spec.slow),
      parked: { hold: () => instance.held.wait(), work: (signal) => instance.work.run(signal) },
    })
    const id = String(++instanceCount)
    const server = await launcher.serve(app.fetch as Fetch, id)
    instance.close = async () => {
      instance.held.releaseAll()
      instance.work.finish()
      await server.close()
      for (const made of [...instance.limiters, ...instance.slowDowns]) made.close()
      await (store as { close?(): unknown }).close?.()
    }
    instances.set(id, instance)
    return { id, ...server.where }
  }

  const control = new Hono()
  control.onError((error, c) => c.json({ error: error.message }, 500))
  control.post('/start', async (c) => {
    const { scenario, store, clock } = await c.req.json<{ scenario: string; store: string; clock?: number }>()
    return c.json(await start(scenario, store, clock))
  })
  const instanceOf = (c: Context) => {
    const instance = instances.get(c.req.param('id') ?? '')
    if (instance === undefined) throw new Error(`no app ${c.req.param('id')}`)
    return instance
  }
  control.post('/advance/:id', (c) => {
    const instance = instanceOf(c)
    instance.clock.now += Number(c.req.query('ms'))
    return c.json({ now: instance.clock.now })
  })
  control.get('/record/:id', (c) => {
    const { decisions, errors, calls, work } = instanceOf(c)
    return c.json({
      decisions,
      errors,
      calls: calls.count,
      work: work.count,
      ...launcher.record?.(c.req.param('id')),
    })
  })
  control.post('/finish/:id', (c) => {
    instanceOf(c).work.finish()
    return c.json({ finished: true })
  })
  control.get('/held/:id', (c) => c.json({ held: instanceOf(c).held.waiting }))
  control.post('/release/:id', (c) => {
    instanceOf(c).held.releaseAll()
    return c.json({ released: true })
  })
  control.post('/close/:id', async (c) => {
    const instance = instanceOf(c)
    instances.delete(c.req.param('id'))
    await instance.close()
    return c.json({ closed: true })
  })
  const closeAll = async () => {
    for (const [id, instance] of instances) {
      instances.delete(id)
      await instance.close()
    }
  }
  return { control, closeAll }
}
