import { withRateLimit } from '@ratewindow/sveltekit'
import { deadStore } from '$lib/store.js'

export const GET = withRateLimit(() => new Response('served'), {
  limit: 1,
  store: deadStore(),
  onStoreError: 'deny',
  onError: () => {},
})
