// middleware.js on the Edge runtime (the default): the memory store only (no TCP there), with its warning.
import { rateLimit } from '@ratewindow/next'

const limited = rateLimit({ limit: 3, window: '1m', trustProxy: 1 })
// docs/next.md's recipe: a route with a limiter of its own is limited here without RateLimit fields.
const quiet = rateLimit({ limit: 3, window: '1m', trustProxy: 1, prefix: 'mw-quiet', headers: false })

export const middleware = (request) => (request.nextUrl.pathname === '/api/quiet' ? quiet : limited)(request)

export const config = { matcher: ['/api/limited/:path*', '/api/both', '/api/quiet'] }
