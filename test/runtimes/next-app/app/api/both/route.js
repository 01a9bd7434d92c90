// Limited by the middleware (or proxy) and by its own withRateLimit: both send RateLimit fields.
import { withRateLimit } from '@ratewindow/next'

export const dynamic = 'force-dynamic'

export const GET = withRateLimit(() => Response.json({ ok: true }), {
  limit: 2,
  window: '1m',
  trustProxy: 1,
  prefix: 'both',
})
