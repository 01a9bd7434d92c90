/** Programs of @ratewindow/sveltekit: a hook, an endpoint and a form action typed against SvelteKit's own types. */

/** The three entry points as an app's files write them, with `event.locals` typed by the augmentation. */
export const SVELTEKIT_PROGRAM = `import {
  type RateLimitLocals,
  rateLimit,
  rateLimitAction,
  slowDown,
  withRateLimit,
} from '@ratewindow/sveltekit'
import { type Actions, fail, type Handle, json, type RequestHandler } from '@sveltejs/kit'
import { sequence } from '@sveltejs/kit/hooks'

declare global {
  namespace App {
    interface Locals extends RateLimitLocals {}
  }
}

const logged: Handle = ({ event, resolve }) => resolve(event)

export const handle: Handle = sequence(
  rateLimit({ limit: 100, window: '1m', skip: (event) => event.route.id === '/health' }),
  slowDown({ delayAfter: 50, delayMs: 100, trustProxy: 1 }),
  logged,
)

export const GET: RequestHandler = withRateLimit(
  ({ locals }) => json({ remaining: locals.rateLimit?.remaining }),
  { limit: 10, window: '1m', skipFailedRequests: true, requestWasSuccessful: (_event, response) => response?.ok === true },
)

const limit = rateLimitAction({ limit: 5, window: '15m' })

export const actions: Actions = {
  default: async (event) => {
    const decision = await limit(event)
    if (!decision.allowed) return fail(429, { retryAfter: decision.retryAfter })
    return { remaining: decision.result?.remaining }
  },
}
`

/**
 * Runtime check of @ratewindow/sveltekit outside a Vite build (as a unit test of one's hooks runs it): limit 2, the
 * hook called with an event as adapter-node makes one; 200, 200, then 429 with Retry-After. (Not through
 * \`sequence\`, which needs the request store of SvelteKit's server.)
 */
export const SVELTEKIT_RUN = `import { rateLimit } from '@ratewindow/sveltekit'

const handle = rateLimit({ limit: 2, window: '1m' })
const event = () => ({
  request: new Request('http://127.0.0.1/api'),
  url: new URL('http://127.0.0.1/api'),
  route: { id: '/api' },
  locals: {},
  platform: undefined,
  getClientAddress: () => '203.0.113.7',
})
const statuses = []
let retryAfter
for (let i = 0; i < 3; i++) {
  const response = await handle({ event: event(), resolve: () => new Response('ok') })
  statuses.push(response.status)
  retryAfter = response.headers.get('retry-after')
}
if (statuses.join() !== '200,200,429' || !retryAfter) throw new Error('statuses ' + statuses.join() + ', Retry-After ' + retryAfter)
console.log('ok')
`
