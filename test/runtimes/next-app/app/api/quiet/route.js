// docs/next.md's recipe for a route with a limiter of its own: the middleware (or proxy) limits it with
// `headers: false`, so the response carries this limiter's fields only.
import { withRateLimit } from '@ratewindow/next'

export const dynamic = 'force-dynamic'

export const GET = withRateLimit(() => Response.json({ ok: true }), {
  limit: 2,
  window: '1m',
  trustProxy: 1,
  prefix: 'quiet',
})
