/**
 * The example API on Cloudflare Workers: 5 requests per 10 s per client, and 3 per minute exactly on POST /login,
 * as on Node, Bun and Deno, with the counts in Durable Objects (@ratewindow/cloudflare) so that every isolate
 * and location shares them. The client is CF-Connecting-IP, which Cloudflare sets (Hono's getConnInfo for
 * Workers). Bound in wrangler.toml; no compatibility flag (no nodejs_compat).
 */

import { env } from 'cloudflare:workers'
import { DurableObjectStore } from '@ratewindow/cloudflare'
import { type RateLimitEnv, rateLimit, slidingWindowLog } from '@ratewindow/hono'
import { Hono } from 'hono'
import { getConnInfo } from 'hono/cloudflare-workers'

// The Durable Object class, bound as RATE_LIMITER in wrangler.toml.
export { RateLimiterObject } from '@ratewindow/cloudflare'

const store = new DurableObjectStore({ namespace: env.RATE_LIMITER })
// An object may live far from the location a request arrives at: a store call may take longer than the
// default 250 ms there before the failure policy answers.
const shared = { store, getConnInfo, timeout: '1s' } as const
const app = new Hono<RateLimitEnv>()
app.use(rateLimit({ limit: 5, window: '10s', ...shared }))
app.get('/', (c) => c.json({ hello: 'world', remaining: c.get('rateLimit')?.remaining }))
app.post('/login', rateLimit({ rules: slidingWindowLog({ limit: 3, window: '1m' }), ...shared }), (c) =>
  c.json({ ok: true }),
)

export default app
