// A route handler on the Edge runtime, limited by withRateLimit with no store: it warns that it counts per instance.
import { withRateLimit } from '@ratewindow/next'

export const runtime = 'edge'
export const dynamic = 'force-dynamic'

export const GET = withRateLimit(() => Response.json({ ok: true }), { limit: 5, window: '1m', trustProxy: 1 })
