/** Programs of @ratewindow/cloudflare: typed in a Workers project, run in Node, and the Worker run in workerd. */

import { loader, type ModuleSystem } from './load.js'

/**
 * A Worker with the Durable Object store, typed by @cloudflare/workers-types (no @types/node): the runtime's
 * binding type must fit the store's structural `namespace`, directly and through a function.
 */
export const CLOUDFLARE_PROGRAM = `/// <reference types="@cloudflare/workers-types" />
import { DurableObjectStore, RateLimiterObject } from '@ratewindow/cloudflare'
import { type RateLimitEnv, rateLimit } from '@ratewindow/hono'
import { Hono } from 'hono'

// NOTE: not getConnInfo from 'hono/cloudflare-workers' here: that module's WebSocket types need the DOM lib,
// which a project typed by @cloudflare/workers-types lacks (Hono's own declarations, with skipLibCheck off).
const clientIp = (c: { req: { header(name: string): string | undefined } }) => c.req.header('cf-connecting-ip')

interface Bindings {
  RATE_LIMITER: DurableObjectNamespace
}
let bindings: Bindings | undefined
const store = new DurableObjectStore({ namespace: () => bindings!.RATE_LIMITER, objects: 8 })
export const direct = (env: Bindings) => new DurableObjectStore({ namespace: env.RATE_LIMITER })

const app = new Hono<RateLimitEnv & { Bindings: Bindings }>()
app.use(async (c, next) => {
  bindings = c.env
  await next()
})
app.use(rateLimit({ limit: 100, window: '1m', store, clientIp }))
app.get('/', (c) => c.json({ remaining: c.get('rateLimit')?.remaining }))

export { RateLimiterObject }
export default app
`

/**
 * Runtime check of @ratewindow/cloudflare in Node: a RateLimiterObject on an in-memory storage, reached through a
 * namespace whose stub hands each fetch to it, decides for a RateLimiter: allowed, allowed, denied.
 */
export function cloudflareRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { DurableObjectStore, RateLimiterObject } = ${load('@ratewindow/cloudflare')}
  const data = new Map()
  const storage = {
    get: async (key) => structuredClone(data.get(key)),
    put: async (key, value) => void data.set(key, structuredClone(value)),
    delete: async (key) => data.delete(key),
    list: async () => new Map(data),
    getAlarm: async () => null,
    setAlarm: async () => {},
  }
  const object = new RateLimiterObject({ storage }, {})
  const namespace = { idFromName: (name) => name, get: () => ({ fetch: (url, init) => object.fetch(new Request(url, init)) }) }
  const limiter = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), store: new DurableObjectStore({ namespace }) })
  const allowed = []
  for (let i = 0; i < 3; i++) allowed.push((await limiter.limit('k')).allowed)
  if (allowed.join() !== 'true,true,false') throw new Error('allowed ' + allowed.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/**
 * The Worker that workerd runs from the installed tarballs (project cloudflare-workers): Hono with the Durable
 * Object store, bundled as wrangler bundles, with no compatibility flag; with overrides, operated from admin
 * routes (registered before the limiter, so not limited) as a support desk would.
 */
export const WORKERD_APP = `import { DurableObjectStore, RateLimiterObject } from '@ratewindow/cloudflare'
import { rateLimit } from '@ratewindow/hono'
import { Hono } from 'hono'
import { getConnInfo } from 'hono/cloudflare-workers'

let bindings
const store = new DurableObjectStore({ namespace: () => bindings.RATE_LIMITER })
const limiter = rateLimit({ limit: 2, window: '1m', store, getConnInfo, name: 'api', overrides: true })
const app = new Hono()
app.use(async (c, next) => {
  bindings = c.env
  await next()
})
app.post('/admin/:key/raise', async (c) => {
  await limiter.overrides.set(c.req.param('key'), { limit: 4 })
  return c.text('raised')
})
app.post('/admin/:key/block', async (c) => {
  const block = await limiter.overrides.block(c.req.param('key'), { for: '1h', reason: 'ticket 5521' })
  return c.json(block)
})
app.use(limiter)
app.get('/', (c) => c.text(typeof globalThis.process + ' ' + navigator.userAgent))
export { RateLimiterObject }
export default app
`
