/**
 * User callbacks that throw or reject, and clients that disconnect: in every adapter, nothing crashes the
 * process, nothing is left as an unhandled rejection, and each ends as a documented outcome.
 */
import { request as httpRequest } from 'node:http'
import { MemoryStore } from '@ratewindow/core'
import request from 'supertest'
import { afterEach, describe, expect, it } from 'vitest'
import { recorder } from '../support/recorder.js'
import { unhandledRejections } from '../support/unhandled.js'
import {
  type AppSpec,
  appPerTest,
  BOTH_PATHS,
  type CommonOptions,
  connectionsClosed,
  slowRoute,
} from './harness.js'

const unhandled = unhandledRejections()

const boom = () => Object.assign(new Error('callback failed'), { code: 'CALLBACK_FAILED' })
const throwing = () => {
  throw boom()
}
const rejecting = () => Promise.reject(boom())

/** The status of the response a two-parameter `requestWasSuccessful` gets: `statusCode`, or `status` (Koa, Hono). */
function statusOf(response: unknown): number {
  const { statusCode, status } = response as { statusCode?: number; status?: number }
  return statusCode ?? status ?? Number.NaN
}

/** Options whose callback fails on the first request (`limit: 1` then `message`/`handler` on the second). */
const FAILING: [string, (fail: () => never | Promise<never>) => CommonOptions, number][] = [
  ['key', (fail) => ({ key: fail as never }), 1],
  ['limit', (fail) => ({ limit: fail as never }), 1],
  ['cost', (fail) => ({ cost: fail as never }), 1],
  ['skip', (fail) => ({ skip: fail as never }), 1],
  ['message', (fail) => ({ limit: 1, message: fail as never }), 2],
  ['handler', (fail) => ({ limit: 1, handler: fail }) as CommonOptions, 2],
]

describe.each(BOTH_PATHS)('$name', (framework) => {
  // Added before appPerTest's afterEach, so it runs after the app closed (after-hooks run in reverse order).
  afterEach(async () => {
    // Let any stray rejection surface before checking.
    await new Promise((resolve) => setImmediate(resolve))
    expect(unhandled).toEqual([])
  })
  const { start, app, close } = appPerTest(
    (spec: AppSpec) => framework.start(spec),
    () => slowRoute.release(),
  )

  describe.each([
    ['throws', throwing],
    ['rejects', rejecting],
  ] as const)('a callback that %s', (_, fail) => {
    // Nest has no `handler` option: the app's exception filters answer the thrown RateLimitException.
    it.each(framework.name.startsWith('Nest') ? FAILING.filter(([name]) => name !== 'handler') : FAILING)(
      '`%s`: the error goes to the framework error handling, the server keeps serving',
      async (_name, make, nth) => {
        const url = await start({ global: make(fail as () => never) })
        for (let i = 1; i < nth; i++) await request(url).get('/').expect(200)
        expect((await request(url).get('/').expect(500)).body).toEqual({ error: 'CALLBACK_FAILED' })
        expect((await request(url).get('/').expect(500)).body).toEqual({ error: 'CALLBACK_FAILED' })
      },
    )
  })

  it('`requestWasSuccessful` that throws: the response stands, the request counts, onError hears of it', async () => {
    const { errors, onError } = recorder()
    const url = await start({
      global: { limit: 2, skipFailedRequests: true, requestWasSuccessful: throwing, onError },
    })
    await request(url).get('/fail').expect(500)
    await request(url).get('/fail').expect(500)
    await request(url).get('/').expect(429) // both counted: no refund without a verdict
    expect(errors).toHaveLength(2)
    expect(errors[0]).toMatchObject({ code: 'CALLBACK_FAILED' })
  })

  // Issue 32: express-rate-limit's `requestWasSuccessful(req, res)` was called as `(statusCode)`: it threw into
  // onError on every response, and `skipFailedRequests` silently stopped giving failed requests back.
  it("express-rate-limit's `requestWasSuccessful(req, res)` gets the adapter's request and response: skipFailedRequests works (regression)", async () => {
    const { errors, onError } = recorder()
    const seen: [unknown, number][] = []
    const url = await start({
      global: {
        limit: 2,
        skipFailedRequests: true,
        onError,
        requestWasSuccessful: (req: unknown, res: unknown) => {
          seen.push([req, statusOf(res)])
          return statusOf(res) < 400
        },
      },
    })
    for (let i = 0; i < 3; i++) await request(url).get('/fail').expect(500) // each given back
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(429)
    expect(errors).toEqual([])
    expect(seen.map(([, status]) => status)).toEqual([500, 500, 500, 200, 200])
    // The request as the adapter's other callbacks get it.
    expect(seen[0]![0]).toBeTypeOf('object')
  })

  it('an async `requestWasSuccessful(statusCode)` is awaited (skipSuccessfulRequests), and so is an async `(req, res)`', async () => {
    const { errors, onError } = recorder()
    const url = await start({
      global: {
        limit: 2,
        skipSuccessfulRequests: true,
        onError,
        requestWasSuccessful: async (status) => status < 400,
      },
    })
    for (let i = 0; i < 4; i++) await request(url).get('/').expect(200) // each given back
    await request(url).get('/fail').expect(500)
    await request(url).get('/fail').expect(500)
    await request(url).get('/').expect(429)
    await close()
    const byArguments = await start({
      global: {
        limit: 1,
        skipFailedRequests: true,
        onError,
        requestWasSuccessful: async (_req: unknown, res: unknown) => statusOf(res) < 400,
      },
    })
    for (let i = 0; i < 3; i++) await request(byArguments).get('/fail').expect(500)
    await request(byArguments).get('/').expect(200)
    await request(byArguments).get('/').expect(429)
    expect(errors).toEqual([])
  })

  it('skipFailedRequests gives nothing back to a client that disconnects once the handler ran (regression)', async () => {
    const url = await start({ global: { limit: 2, skipFailedRequests: true, store: new MemoryStore() } })
    for (let i = 0; i < 2; i++) {
      await new Promise<void>((resolve) => {
        const pending = httpRequest(`${url}/slow`)
        pending.on('error', () => {})
        pending.end()
        const whenRunning = () => {
          if (slowRoute.running === 0) return void setImmediate(whenRunning)
          pending.destroy()
          resolve()
        }
        whenRunning()
      })
      await connectionsClosed(app()!)
      slowRoute.release() // the handler finishes after the client left
    }
    // Both were admitted and ran their handler; neither was refunded, so the limit holds.
    await request(url).get('/').expect(429)
  })
})
