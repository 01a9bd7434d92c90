/** Programs of @ratewindow/next: its entry points typed against Next's own types, and run outside a Next build. */

import { loader, type ModuleSystem } from './load.js'

/** @ratewindow/next's three entry points, typed against Next's own `NextRequest`. */
export const NEXT_PROGRAM = `import {
  type ActionDecision,
  rateLimit,
  rateLimitAction,
  rateLimitOf,
  withRateLimit,
} from '@ratewindow/next'
import type { NextRequest } from 'next/server.js'

export const proxy = rateLimit({
  limit: 100,
  window: '1m',
  key: (request: NextRequest) => request.cookies.get('session')?.value ?? 'anonymous',
})

export const config = { matcher: '/api/:path*' }

export const POST = withRateLimit(
  async (request: Request) => Response.json({ remaining: rateLimitOf(request)?.remaining }),
  { limit: 10, window: '1m', trustProxy: 1, skipFailedRequests: true },
)

const limit = rateLimitAction({ limit: 5, window: '10m', trustProxy: 1 })

export async function subscribe(headers: Headers): Promise<ActionDecision> {
  return limit(headers)
}
`

/**
 * Runtime check of @ratewindow/next outside a Next build (as a test of one's middleware runs it): limit 1 behind
 * one proxy; the first request goes on (`x-middleware-next`) with the headers, the second gets 429.
 */
export function nextRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { rateLimit } = ${load('@ratewindow/next')}
  const { NextRequest } = ${load('next/server.js')}
  const middleware = rateLimit({ limit: 1, window: '1m', trustProxy: 1 })
  const request = () => new NextRequest('http://localhost/api', { headers: { 'x-forwarded-for': '203.0.113.7' } })
  const first = await middleware(request())
  const second = await middleware(request())
  if (first.headers.get('x-middleware-next') !== '1' || first.headers.get('ratelimit-remaining') !== '0')
    throw new Error('first ' + JSON.stringify([...first.headers]))
  if (second.status !== 429 || !second.headers.get('retry-after')) throw new Error('second ' + second.status)
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}
