import { rateLimit, slowDown } from '@ratewindow/sveltekit'
import { sequence } from '@sveltejs/kit/hooks'
import { storeFromEnv } from '$lib/store.js'

// NOTE: by the route SvelteKit matched, not by `url.pathname`: `/api/%6Cimited` reaches /api/limited too.
const under = (route) => (event) => event.route.id !== route
const within = (prefix) => (event) => !event.route.id?.startsWith(prefix)

export const handle = sequence(
  // Keyed by event.getClientAddress(): adapter-node's socket peer (no ADDRESS_HEADER set).
  rateLimit({ limit: 3, window: '1m', skip: under('/api/limited'), ...storeFromEnv('limited') }),
  // Behind one proxy: the rightmost X-Forwarded-For entry is the client.
  rateLimit({
    limit: 3,
    window: '1m',
    trustProxy: 1,
    skip: under('/api/trusted'),
    ...storeFromEnv('trusted'),
  }),
  // Response-dependent: a failed response (status >= 400) is given back.
  rateLimit({
    limit: 2,
    window: '1m',
    trustProxy: 1,
    skipFailedRequests: true,
    skip: under('/api/failing'),
    ...storeFromEnv('failing'),
  }),
  // A page and the endpoint its load reads with `event.fetch`: one count per page view.
  rateLimit({ limit: 3, window: '1h', trustProxy: 1, skip: within('/sub'), ...storeFromEnv('sub') }),
  // Two streams at once per client: a slot is held until the stream is sent.
  rateLimit({
    limit: 1000,
    window: '1h',
    trustProxy: 1,
    concurrency: { limit: 2 },
    skip: under('/api/stream'),
    ...storeFromEnv('stream'),
  }),
  slowDown({
    windowMs: 3_600_000, // an hour: a window ending between two requests of a test is then once in thousands of runs
    delayAfter: 1,
    delayMs: 20,
    trustProxy: 1,
    skip: under('/api/slow'),
    ...storeFromEnv('slow'),
  }),
)
