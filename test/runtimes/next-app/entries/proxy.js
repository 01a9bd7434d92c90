// proxy.js (Next 16, Node.js runtime): memory or Redis, as the server was started.
import { rateLimit } from '@ratewindow/next'
import { storeFromEnv } from './lib/store.js'

const limited = rateLimit({ limit: 3, window: '1m', trustProxy: 1, ...storeFromEnv('mw') })
// docs/next.md's recipe: a route with a limiter of its own is limited here without RateLimit fields.
const quiet = rateLimit({
  limit: 3,
  window: '1m',
  trustProxy: 1,
  ...storeFromEnv('mw-quiet'),
  headers: false,
})

export const proxy = (request) => (request.nextUrl.pathname === '/api/quiet' ? quiet : limited)(request)

export const config = { matcher: ['/api/limited/:path*', '/api/both', '/api/quiet'] }
