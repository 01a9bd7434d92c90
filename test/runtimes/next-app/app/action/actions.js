'use server'
import { rateLimitAction } from '@ratewindow/next'
import { headers } from 'next/headers'
import { storeFromEnv } from '../../lib/store.js'

const limit = rateLimitAction({
  limit: 2,
  window: '1m',
  trustProxy: 1,
  ...storeFromEnv('action'),
})

export async function limited() {
  const decision = await limit(await headers())
  return { allowed: decision.allowed, retryAfter: decision.retryAfter, remaining: decision.result?.remaining }
}
