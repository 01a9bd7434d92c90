/**
 * The Hono side of the HTTP suite on workerd (test/runtimes/hono-suite.test.ts): one Worker, bundled from the built
 * packages as wrangler bundles it and run by miniflare without any compatibility flag, serves every app of the
 * suite. A Worker has one address, so the apps are routed by path: `/app/<id>/<path>` is `<path>` of app `<id>`
 * (the app sees `<path>`); `GET /runtime` answers `{userAgent}` (`Cloudflare-Workers` in workerd); every other
 * path is the control app of suite-scenarios.ts (`POST /start` answers `{id, path}`). The client address is `CF-Connecting-IP` through Hono's `getConnInfo` for Workers (miniflare
 * sets it to the connection's peer, 127.0.0.1); work after the response goes through the request's
 * `executionCtx.waitUntil`, which the app is given, counted per app (`deferred` in GET /record/:id).
 *
 * Stores: `memory` (a MemoryStore: per isolate, and this one Worker is one isolate), `durable-object`
 * (DurableObjectStore over the RATE_LIMITER binding of the RateLimiterObject class this module exports; a store
 * name of its own per app, its clock carried by every call), `failing`. No Redis: its clients need TCP sockets,
 * which Workers only have with `nodejs_compat`.
 */
import { type DurableObjectNamespaceLike, DurableObjectStore } from '@ratewindow/cloudflare'
import type { Store } from '@ratewindow/core'
import { MemoryStore } from '@ratewindow/hono'
import { getConnInfo } from 'hono/cloudflare-workers'
import { type Fetch, suiteControl } from './suite-scenarios.js'

export { RateLimiterObject } from '@ratewindow/cloudflare'

interface Bindings {
  RATE_LIMITER: DurableObjectNamespaceLike
}

/** The bindings of the request being served: the Durable Object store reads its namespace when it calls. */
let bindings: Bindings | undefined
const apps = new Map<string, Fetch>()
/** Per app: the work its middleware handed to `executionCtx.waitUntil`, and how much of it has settled. */
const deferred = new Map<string, { deferred: number; settled: number }>()

interface ExecutionContext {
  waitUntil(work: Promise<unknown>): void
  passThroughOnException(): void
  props: unknown
}
const down = () => Promise.reject(new Error('connection refused'))

const { control } = suiteControl({
  getConnInfo,
  async makeStore(kind, clock): Promise<Store> {
    if (kind === 'memory') return new MemoryStore({ clock })
    if (kind === 'failing') return { consume: down, peek: down, refund: down, reset: down }
    if (kind === 'durable-object')
      return new DurableObjectStore({
        namespace: () => bindings!.RATE_LIMITER,
        name: `rt-workerd-${crypto.randomUUID()}`,
        objects: 4,
        clock,
      })
    throw new Error(`no store named ${kind} on workerd`)
  },
  async serve(fetch, id) {
    apps.set(id, fetch)
    deferred.set(id, { deferred: 0, settled: 0 })
    return {
      where: { path: `/app/${id}` },
      close: async () => {
        apps.delete(id)
        deferred.delete(id)
      },
    }
  },
  async park(released) {
    let done = false
    void released.then(() => {
      done = true
    })
    while (!done) await new Promise((resolve) => setTimeout(resolve, 5))
  },
  record: (id) => ({ ...deferred.get(id) }),
})

export default {
  fetch(request: Request, env: Bindings, ctx: ExecutionContext): Response | Promise<Response> {
    bindings = env
    const url = new URL(request.url)
    if (url.pathname === '/runtime')
      return Response.json({
        userAgent: (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent,
      })
    const routed = /^\/app\/(\d+)(\/.*)?$/.exec(url.pathname)
    if (routed === null) return control.fetch(request, env, ctx)
    const id = routed[1]!
    const app = apps.get(id)
    const counts = deferred.get(id)
    if (app === undefined || counts === undefined) return new Response(`no app ${id}`, { status: 404 })
    url.pathname = routed[2] ?? '/'
    // The app's execution context: the request's own, counting what is handed to waitUntil and what settled.
    const context: ExecutionContext = {
      waitUntil(work) {
        counts.deferred++
        ctx.waitUntil(work.then(() => void counts.settled++))
      },
      passThroughOnException: () => ctx.passThroughOnException(),
      props: ctx.props,
    }
    return app(new Request(url, request), env, context)
  },
}
