import { rateLimitAction } from '@ratewindow/sveltekit'
import { fail } from '@sveltejs/kit'
import { storeFromEnv } from '$lib/store.js'

const limit = rateLimitAction({ limit: 2, window: '1m', trustProxy: 1, ...storeFromEnv('action') })

export const actions = {
  default: async (event) => {
    const decision = await limit(event)
    if (!decision.allowed) return fail(429, { retryAfter: decision.retryAfter })
    return { remaining: decision.result?.remaining }
  },
}
