// proxy.js (Next 16, Node.js runtime): memory or Redis, as the server was started.
import { rateLimit } from '@ratewindow/next'
import { storeFromEnv } from './lib/store.js'

export const proxy = rateLimit({ limit: 3, window: '1m', trustProxy: 1, ...storeFromEnv('mw') })

export const config = { matcher: '/api/limited/:path*' }
