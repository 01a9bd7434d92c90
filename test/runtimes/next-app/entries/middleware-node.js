// middleware.js on the Node.js runtime (Next 15.5): memory or Redis, as the server was started.
import { rateLimit } from '@ratewindow/next'
import { storeFromEnv } from './lib/store.js'

export const middleware = rateLimit({
  limit: 3,
  window: '1m',
  trustProxy: 1,
  ...storeFromEnv('mw'),
})

export const config = { runtime: 'nodejs', matcher: '/api/limited/:path*' }
