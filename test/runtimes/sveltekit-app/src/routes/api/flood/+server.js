import { withRateLimit } from '@ratewindow/sveltekit'
import { storeFromEnv } from '$lib/store.js'

// One endpoint's own limit, keyed by the socket's peer: 20 a minute.
export const GET = withRateLimit(() => new Response('ok'), {
  limit: 20,
  window: '1m',
  ...storeFromEnv('flood'),
})
