/**
 * DurableObjectStore passes the store conformance suite (the one MemoryStore and RedisStore pass) with its
 * objects running in workerd: the suite runs here in Node, and the store talks to RateLimiterObject in workerd
 * (miniflare, no compatibility flag) through the namespace binding miniflare hands out. The suite drives time:
 * the store's `clock` option makes every call carry the test clock's time, which the object uses instead of its
 * own. One miniflare instance for the file.
 */
import { DurableObjectStore } from '@ratewindow/cloudflare'
import { ConcurrencyLimiter, fixedWindow, RateLimiter } from '@ratewindow/core'
import { describeStoreConformance } from '@ratewindow/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startWorkerd } from './workerd.js'

let workerd: Awaited<ReturnType<typeof startWorkerd>> | undefined
// biome-ignore lint/suspicious/noExplicitAny: miniflare's proxy of the binding.
let namespace: any

beforeAll(async () => {
  workerd = await startWorkerd()
  namespace = workerd.namespace
}, 60_000)

afterAll(async () => {
  await workerd?.dispose()
})

describeStoreConformance(
  { describe, it, expect },
  {
    name: 'DurableObjectStore (workerd)',
    createStore: (clock) => new DurableObjectStore({ namespace, objects: 4, clock: clock.read }),
    // Overrides, blocks, give/take and inspect: the records in the objects' storage, read by the deciding fetch.
    overrides: true,
    // Quotas: the rule's calendar travels with the call; the object computes the periods with workerd's Intl.
    quotas: true,
    // Plans: the plan's JSON travels with the call and is kept with the key's state in the object.
    plans: true,
    // Each call is a round trip to workerd (~2 ms through miniflare's proxy): fewer random traces per property.
    numRuns: 25,
    // Each turn's calls go in one request, decided in order; requests of different turns in flight at once may be
    // decided in either order (a fresh stub each; a loaded run saw a later peek decided before an earlier limit).
    ordersTurns: false,
  },
)

describe('DurableObjectStore in workerd, on its own clock', () => {
  it('decides with the object time: 2 admitted, the 3rd denied with a truthful wait; reset clears it', async () => {
    const store = new DurableObjectStore({ namespace, objects: 2 })
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1h' }), store, prefix: 'own' })
    const key = `k${Math.random()}`
    expect((await limiter.limit(key)).allowed).toBe(true)
    expect((await limiter.limit(key)).allowed).toBe(true)
    const denied = await limiter.limit(key)
    expect(denied.allowed).toBe(false)
    expect(denied.retryAfter).toBeGreaterThan(0)
    expect(denied.retryAfter).toBeLessThanOrEqual(3_600_000)
    await limiter.reset(key)
    expect((await limiter.limit(key)).allowed).toBe(true)
  })
})

describe('DurableObjectStore in workerd: concurrency leases', () => {
  it('holds up to the limit at once; a release frees a slot; leases expire by the object clock', async () => {
    const clock = { now: 1_700_000_000_000 }
    const store = new DurableObjectStore({ namespace, objects: 3, clock: () => clock.now })
    const limiter = new ConcurrencyLimiter({ limit: 2, store, prefix: `c${Math.random()}`, lease: '10s' })
    const first = await limiter.acquire('k')
    const second = await limiter.acquire('k')
    expect([first.allowed, second.allowed, second.inFlight]).toEqual([true, true, 2])
    const third = await limiter.acquire('k')
    expect(third).toMatchObject({ allowed: false, inFlight: 2 })
    await first.release()
    expect(await limiter.acquire('k')).toMatchObject({ allowed: true, inFlight: 2 })
    clock.now += 10_000 // both leases held have run out
    expect(await limiter.acquire('k')).toMatchObject({ allowed: true, inFlight: 1 })
    expect(await limiter.acquire('other')).toMatchObject({ allowed: true, inFlight: 1 })
  })
})
