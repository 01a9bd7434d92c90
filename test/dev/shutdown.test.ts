/**
 * Shutting down in the order docs/shutdown.md gives, and in the wrong one (issue 21, item 7): SyncedStore.close()
 * after client.quit() says how many counts never reached Redis.
 */
import { RateLimiter, SyncedStore, slidingWindowCounter } from '@ratewindow/core'
import { TestClock, testPrefix } from '@ratewindow/testing'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { redisEnvironment } from '../support/redis.js'

async function connected() {
  const client = new Redis({
    port: redisEnvironment().standalonePort,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
  })
  await client.connect()
  return client
}

async function counted(client: Redis, onError: (error: unknown) => void) {
  const clock = new TestClock()
  const store = new SyncedStore({ client, clock: clock.read, interval: '1h', maxPending: 100, onError })
  const limiter = new RateLimiter({
    rules: slidingWindowCounter({ limit: 1_000, window: '1m' }),
    store,
    prefix: testPrefix('shutdown'),
  })
  for (let i = 0; i < 3; i++) expect((await limiter.limit('client')).allowed).toBe(true)
  return store
}

describe('SyncedStore shutdown', () => {
  it('closed before its client: every count reaches Redis, { unsynced: 0 }', async () => {
    const client = await connected()
    const errors: unknown[] = []
    const store = await counted(client, (error) => errors.push(error))
    expect(await store.close()).toEqual({ unsynced: 0 })
    await client.quit()
    expect(errors).toEqual([])
  })

  it('closed after client.quit(): resolves the counts that were lost, and onError says so', async () => {
    const client = await connected()
    const errors: Error[] = []
    const store = await counted(client, (error) => errors.push(error as Error))
    await client.quit()
    expect(await store.close()).toEqual({ unsynced: 3 })
    expect(errors.at(-1)?.message).toMatch(
      /could not send 3 counted cost units to Redis.*Close the SyncedStore before its Redis client/,
    )
  })
})
