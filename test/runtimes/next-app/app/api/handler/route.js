import { rateLimitOf, withRateLimit } from '@ratewindow/next'
import { storeFromEnv } from '../../../lib/store.js'

export const dynamic = 'force-dynamic'

export const GET = withRateLimit((request) => Response.json({ remaining: rateLimitOf(request)?.remaining }), {
  limit: 2,
  window: '1m',
  trustProxy: 1,
  ...storeFromEnv('route'),
})
