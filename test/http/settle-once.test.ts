/**
 * `skipFailedRequests` refunds a failed response when it finishes; an application that settles the actual cost
 * from its own 'finish' listener settles the same result. The result is given back once, not twice: the second
 * give-back used to free units of the client's other requests (with an actual cost of 0, without limit).
 */
import type { SettleResult } from '@ratewindow/core'
import { rateLimit } from '@ratewindow/express'
import express5 from 'express'
import express4 from 'express4'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { appPerTest, listening, storesOnClock } from './harness.js'

const stores = storesOnClock('settle')

describe.each([
  ['Express 5', express5],
  ['Express 4', express4 as unknown as typeof express5],
])('%s', (_, create) => {
  const { start } = appPerTest((server: ReturnType<typeof create>) =>
    listening(server.listen(0, '127.0.0.1')),
  )

  it.each(stores)(
    'with the %s: skipFailedRequests and a settle from a finish listener give a failed request back once',
    async (_, makeStore) => {
      const clock = new ManualClock(1_700_000_000_000)
      const settles: Promise<SettleResult>[] = []
      const server = create()
      server.use(
        rateLimit({
          limit: 24,
          window: '1h',
          algorithm: 'fixed-window',
          cost: 8,
          skipFailedRequests: true,
          store: makeStore(clock),
        }),
      )
      server.get('/', (_request, response) => {
        response.send('ok')
      })
      server.get('/fail', (req, response) => {
        // The application reports the actual cost once the response is out: nothing was used.
        response.on('finish', () => {
          const settled = req.rateLimit?.settle?.(0)
          if (settled !== undefined) settles.push(settled)
        })
        response.status(500).send('failed')
      })
      const url = await start(server)
      // 16 of 24 used by two served requests.
      await request(url).get('/').expect(200)
      await request(url).get('/').expect(200)
      for (let i = 0; i < 5; i++) {
        await request(url).get('/fail').expect(500)
        // Calls on one result run in order: once the settle is done, the refund before it is too.
        expect(await Promise.all(settles.splice(0))).toEqual([{ charged: 0, refunded: 0, uncharged: 0 }])
      }
      // The failed requests cost nothing, and freed nothing of the others: 8 are left, one request's worth.
      const statuses: number[] = []
      for (let i = 0; i < 3; i++) statuses.push((await request(url).get('/')).status)
      expect(statuses).toEqual([200, 429, 429])
    },
  )
})
