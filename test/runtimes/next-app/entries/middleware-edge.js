// middleware.js on the Edge runtime (the default): the memory store only (no TCP there), with its warning.
import { rateLimit } from '@ratewindow/next'

export const middleware = rateLimit({ limit: 3, window: '1m', trustProxy: 1 })

export const config = { matcher: '/api/limited/:path*' }
