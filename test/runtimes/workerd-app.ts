// Run by test/runtimes/workerd.test.ts in workerd (miniflare), bundled from the built packages without
// nodejs_compat: a Hono app with @ratewindow/hono on Cloudflare Workers. The client address comes from
// CF-Connecting-IP through Hono's getConnInfo for Workers.
import { MemoryStore, type RateLimitEnv, rateLimit } from '@ratewindow/hono'
import { Hono } from 'hono'
import { getConnInfo } from 'hono/cloudflare-workers'

/** What the test reads back from `/state`: console warnings and the work handed to `waitUntil`. */
const state = { warnings: [] as string[], waitUntil: 0, settled: 0 }
const warn = console.warn.bind(console)
console.warn = (...args: unknown[]) => {
  state.warnings.push(args.map(String).join(' '))
  warn(...args)
}

const down = () => Promise.reject(new Error('connection refused'))
const failing = { consume: down, peek: down, refund: down, reset: down }

const app = new Hono<RateLimitEnv>()
app.use('/memory', rateLimit({ limit: 2, window: '1m', store: new MemoryStore(), getConnInfo }))
// No store: the default MemoryStore, which counts per isolate on Workers and says so once, at first use.
app.use('/default', rateLimit({ limit: 2, window: '1m', getConnInfo }))
app.use('/failing', rateLimit({ limit: 2, window: '1m', store: failing, getConnInfo, onError: () => {} }))
// Failed requests are given back after the response: the refund goes through executionCtx.waitUntil.
app.use(
  '/refund',
  rateLimit({ limit: 1, window: '1m', store: new MemoryStore(), getConnInfo, skipFailedRequests: true }),
)
app.get('/memory', (c) => c.text(`ok ${c.get('rateLimit')?.key}`))
app.get('/failing', (c) => c.text('ok'))
app.get('/default', (c) => c.text('ok'))
app.get('/refund', (c) => c.text('failed', 500))
app.get('/runtime', (c) =>
  c.json({
    userAgent: (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent,
    process: typeof (globalThis as { process?: unknown }).process,
    Buffer: typeof (globalThis as { Buffer?: unknown }).Buffer,
    WeakRef: typeof (globalThis as { WeakRef?: unknown }).WeakRef,
  }),
)
app.get('/state', (c) => c.json(state))

interface ExecutionContext {
  waitUntil(work: Promise<unknown>): void
  passThroughOnException(): void
  props: unknown
}

export default {
  fetch(request: Request, env: unknown, ctx: ExecutionContext) {
    // Counts what the middleware hands to waitUntil, and whether it settled, then passes it on.
    const counted: ExecutionContext = {
      waitUntil(work) {
        state.waitUntil++
        ctx.waitUntil(work.then(() => void state.settled++))
      },
      passThroughOnException: () => ctx.passThroughOnException(),
      props: ctx.props,
    }
    return app.fetch(request, env, counted)
  },
}
