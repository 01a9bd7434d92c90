/**
 * Issue 19, item 1: an in-flight slot is free when the handler's work is done, never because the client
 * disconnected. Clients that close their connections while their handlers keep running must not get more
 * than `limit` handlers running at once, in every adapter and framework version, on memory and on Redis.
 */

import { MemoryStore } from '@ratewindow/core'
import request from 'supertest'
import { beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { open, until } from '../support/connections.js'
import {
  type AppSpec,
  appPerTest,
  connectionsClosed,
  FRAMEWORKS,
  type RunningApp,
  slowRoute,
  storesOnClock,
  workRoute,
} from './harness.js'

const stores = storesOnClock('ccdrop')

/**
 * `rounds` rounds of 10 requests to GET /work that close their connections once each was decided (answered
 * 429, or its handler running), while the handlers keep running. Returns the most handlers that ran at once.
 */
async function disconnectingRounds(app: RunningApp, rounds: number): Promise<number> {
  for (let round = 0; round < rounds; round++) {
    const started = workRoute.started
    const clients = Array.from({ length: 10 }, () => open(`${app.url}/work`))
    await until(
      () =>
        clients.filter((client) => client.status !== undefined).length + workRoute.started - started === 10,
      'every request of the round was decided',
    )
    for (const client of clients) client.close()
    await connectionsClosed(app)
  }
  return workRoute.peak
}

describe.each(FRAMEWORKS)('$name', (framework) => {
  beforeEach(() => workRoute.reset())
  const tested = appPerTest(
    (spec: AppSpec) => framework.start(spec),
    () => {
      workRoute.finish()
      slowRoute.release()
    },
  )
  const start = async (spec: AppSpec) => {
    await tested.start(spec)
    return tested.app()!
  }

  it('a handler that returns after its client left frees the slot; on Express only by ending the response, else after its lease', async () => {
    const clock = new ManualClock(1_700_000_000_000)
    const running = await start({
      global: {
        limit: 1_000,
        concurrency: { limit: 1, lease: '1m' },
        store: new MemoryStore({ clock: clock.read }),
      },
    })
    const client = open(`${running.url}/slow`)
    await until(() => slowRoute.running === 1, 'the handler runs')
    client.close()
    await connectionsClosed(running)
    await request(running.url).get('/').expect(429) // the handler still runs
    // GET /slow returns; on Express it does not end a response whose client left (`response.destroyed`).
    slowRoute.release()
    if (framework.name.startsWith('Express')) {
      await request(running.url).get('/').expect(429)
      clock.advance(60_000) // the lease runs out
    }
    await until(async () => (await request(running.url).get('/')).status === 200, 'the slot came back')
  })

  describe.each(stores)('with the %s', (_, makeStore) => {
    it('clients that disconnect while their handlers run never get more than `limit` handlers running at once', async () => {
      const running = await start({
        global: { limit: 1_000, concurrency: { limit: 2 }, store: makeStore() },
      })
      // 4 rounds of 10 disconnecting clients: before the fix, each round's disconnects freed 2 more slots (8).
      expect(await disconnectingRounds(running, 4)).toBe(2)
      expect(workRoute.running).toBe(2)
      // The handlers end their responses (to clients long gone): now the slots are free.
      workRoute.finish()
      await until(
        async () => (await request(running.url).get('/')).status === 200,
        'a slot came back once the handlers ended',
      )
    })

    it('`releaseOnClose`: a client that disconnects gives its slot back at once (SSE, long polls)', async () => {
      const running = await start({
        global: { limit: 1_000, concurrency: { limit: 2, releaseOnClose: true }, store: makeStore() },
      })
      // Each round's disconnects free the slots while the handlers keep running: the documented trade.
      expect(await disconnectingRounds(running, 2)).toBe(4)
    })
  })
})
