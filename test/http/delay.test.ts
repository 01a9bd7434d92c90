/**
 * Issue 24: `delay: { max }` in every adapter and framework version, on memory and on Redis. Time is driven by
 * fake timers (`Date` and `setTimeout` only: the servers, sockets and Redis clients keep their own timers): the
 * stores read `Date.now()`, and the limiter's one timer for waiting requests is a `setTimeout`.
 */

import { type DecisionEvent, type HttpRateLimitOptions, RateLimitError, SyncedStore } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import request from 'supertest'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { ManualClock } from '../support/clock.js'
import { open } from '../support/connections.js'
import { standaloneClient } from '../support/redis.js'
import { type AppSpec, appPerTest, FRAMEWORKS, releaseHeld, storesOnClock } from './harness.js'

/** The stores of the HTTP tests, on the faked `Date.now()`. */
const stores = storesOnClock('delay').map(
  ([name, make]) => [name, () => make({ read: () => Date.now() } as ManualClock)] as const,
)

/**
 * Lets the event loop turn (`setImmediate` is not faked) until `condition`, for 10 s of real time at most
 * (`performance.now()` is not faked either): for what the server does out of the client's sight.
 */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 10_000
  while (performance.now() < deadline) {
    if (condition()) return
    await new Promise((resolve) => setImmediate(resolve))
  }
  throw new Error(`gave up waiting until ${what}`)
}

/** A supertest request that records when it is answered, without waiting for it. */
function send(url: string) {
  const answer: { response: request.Response | undefined; done: Promise<request.Response> } = {
    response: undefined,
    done: request(url)
      .get('/')
      .then((response) => {
        answer.response = response
        return response
      }),
  }
  return answer
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'], now: 1_700_000_000_000 })
})
afterEach(() => {
  vi.useRealTimers()
})

describe.each(FRAMEWORKS)('$name', (framework) => {
  const tested = appPerTest(
    (spec: AppSpec) => framework.start(spec),
    async () => {
      releaseHeld()
      // A test that failed may leave a request waiting: let it go, so that the server can close.
      await vi.advanceTimersByTimeAsync(10_000)
    },
  )

  describe.each(stores)('with the %s', (_, makeStore) => {
    /** An app limited to 1 request per second (GCRA, no burst) that waits up to `delay.max`. */
    async function start(more: Partial<HttpRateLimitOptions<unknown>> = {}) {
      const events: DecisionEvent[] = []
      const url = await tested.start({
        global: {
          algorithm: 'gcra',
          limit: 1,
          window: '1s',
          delay: { max: '1500ms' },
          store: makeStore(),
          observer: { onDecision: (event) => events.push(event) },
          ...more,
        },
      })
      const delayed = () => events.filter((event) => event.outcome === 'delayed')
      return { url, events, delayed }
    }

    it('a request over the limit waits for its slot, then is served as admitted: remaining 0, no Retry-After', async () => {
      const { url, delayed } = await start()
      expect((await request(url).get('/')).status).toBe(200)
      const second = send(url)
      await until(() => delayed().length === 1, 'the second request waits')
      expect(delayed()[0]!.result.delay).toBe(1_000)
      await vi.advanceTimersByTimeAsync(999)
      await new Promise((resolve) => setImmediate(resolve))
      expect(second.response).toBeUndefined()
      await vi.advanceTimersByTimeAsync(1)
      const response = await second.done
      expect(response.status).toBe(200)
      expect(response.text).toBe('ok')
      expect(response.headers['ratelimit-remaining']).toBe('0')
      expect(response.headers['ratelimit-limit']).toBe('1')
      expect(response.headers['retry-after']).toBeUndefined()
    })

    it('beyond `max`, and beyond `maxPerKey` waiting, the answer is 429 with Retry-After, at once', async () => {
      const { url, delayed } = await start({ delay: { max: '1500ms', maxPerKey: 1 } })
      await request(url).get('/').expect(200)
      const waiting = send(url)
      await until(() => delayed().length === 1, 'one request waits')
      // The key's one place is taken: refused at once, as without `delay` (it would pass in 2 s).
      const refused = await request(url).get('/')
      expect(refused.status).toBe(429)
      expect(refused.headers['retry-after']).toBe('2')
      await vi.advanceTimersByTimeAsync(1_000)
      expect((await waiting.done).status).toBe(200)
      // Nothing waits now, and the next slot is 1 s away: within `max`, so this one waits again.
      const third = send(url)
      await until(() => delayed().length === 2, 'the third request waits')
      await vi.advanceTimersByTimeAsync(1_000)
      expect((await third.done).status).toBe(200)
    })

    it('a slot further than `max` is refused with 429 and nothing reserved', async () => {
      const { url, delayed } = await start({ delay: { max: '1500ms', maxPerKey: 5 } })
      await request(url).get('/').expect(200)
      const first = send(url)
      await until(() => delayed().length === 1, 'a request waits')
      // The next slot is 2 s away, beyond `max`.
      expect((await request(url).get('/')).status).toBe(429)
      await vi.advanceTimersByTimeAsync(1_000)
      expect((await first.done).status).toBe(200)
      // Nothing was reserved by the refused request: the next slot is 1 s after the last served one.
      const next = send(url)
      await until(() => delayed().length === 2, 'the next request waits')
      expect(delayed()[1]!.result.delay).toBe(1_000)
      await vi.advanceTimersByTimeAsync(1_000)
      await next.done
    })

    it('a client that disconnects while waiting gives its slot back to the next request', async () => {
      const { url, delayed } = await start({ delay: { max: '5s' } })
      await request(url).get('/').expect(200)
      const gone = open(`${url}/`)
      await until(() => delayed().length === 1, 'the request waits')
      expect(delayed()[0]!.result.delay).toBe(1_000)
      gone.close()
      let connections = -1
      await until(() => {
        // Answered on a later turn: the condition reads the previous turn's count.
        tested.app()!.server.getConnections((_, count) => {
          connections = count
        })
        return connections === 0
      }, 'the server saw the client go')
      // Its slot (1 s away) is free again: the next request takes it, not the one after (2 s).
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
      const next = send(url)
      await until(() => delayed().length === 2, 'the next request waits')
      expect(delayed()[1]!.result.delay).toBe(1_000)
      await vi.advanceTimersByTimeAsync(1_000)
      expect((await next.done).status).toBe(200)
      expect(gone.status).toBeUndefined()
    })

    it("a client leaving the middle of the queue leaves its slot empty: no later request takes a waiting one's slot (issue 32)", async () => {
      const { url, delayed } = await start({ delay: { max: '5s' } })
      await request(url).get('/').expect(200)
      const first = send(url)
      await until(() => delayed().length === 1, 'the first request waits')
      const gone = open(`${url}/`)
      await until(() => delayed().length === 2, 'the second request waits')
      const third = send(url)
      await until(() => delayed().length === 3, 'the third request waits')
      expect(delayed().map((event) => event.result.delay)).toEqual([1_000, 2_000, 3_000])
      gone.close()
      let connections = -1
      await until(() => {
        tested.app()!.server.getConnections((_, count) => {
          connections = count
        })
        return connections === 2
      }, 'the server saw the client go')
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
      const next = send(url)
      await until(() => delayed().length === 4, 'the next request waits')
      // After the third (3 s), not on its slot: the 2 s slot stays empty.
      expect(delayed()[3]!.result.delay).toBe(4_000)
      await vi.advanceTimersByTimeAsync(4_000)
      expect((await Promise.all([first.done, third.done, next.done])).map((r) => r.status)).toEqual([
        200, 200, 200,
      ])
    })

    it('shadow mode reports the request as delayed and serves it at once', async () => {
      const { url, delayed } = await start({ shadow: true })
      await request(url).get('/').expect(200)
      const response = await request(url).get('/')
      expect(response.status).toBe(200)
      expect(delayed()).toHaveLength(1)
      expect(delayed()[0]!.result).toMatchObject({ shadow: true, delay: 1_000 })
    })

    it('a waiting request holds its in-flight slot (`concurrency`): one more is refused for it', async () => {
      const { url, delayed } = await start({ concurrency: { limit: 1 }, delay: { max: '5s' } })
      await request(url).get('/').expect(200)
      const waiting = send(url)
      await until(() => delayed().length === 1, 'a request waits')
      // Rate-wise this one could wait too (2 s), but the waiting request holds the only in-flight slot.
      const refused = await request(url).get('/')
      expect(refused.status).toBe(429)
      expect(refused.headers['retry-after']).toBe('1')
      await vi.advanceTimersByTimeAsync(1_000)
      expect((await waiting.done).status).toBe(200)
    })
  })
})

describe('delay: refused at construction where no slot can be reserved', () => {
  it.each([
    ['the default algorithm (sliding window counter)', {}],
    ['a fixed window', { algorithm: 'fixed-window' as const }],
  ])('%s: a clear error naming `delay` and recommending GCRA', (_, options) => {
    let error: unknown
    try {
      expressRateLimit({ limit: 10, window: '1m', delay: {}, ...options })
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(RateLimitError)
    expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'delay' })
    expect((error as Error).message).toMatch(/gcra\(\{ limit, window \}\)/)
  })

  it('a SyncedStore is refused: it cannot reserve a slot the other processes see', async () => {
    const store = new SyncedStore({ client: standaloneClient() })
    try {
      expect(() => expressRateLimit({ algorithm: 'gcra', delay: {}, store })).toThrow(
        expect.objectContaining({ option: 'delay', message: expect.stringContaining('SyncedStore cannot') }),
      )
    } finally {
      await store.close()
    }
  })

  it("a `delay.max` beyond the limiter's `reservationHorizon` is refused, naming both (issue 32)", () => {
    expect(() =>
      expressRateLimit({ algorithm: 'gcra', delay: { max: '2m' }, reservationHorizon: '1m' }),
    ).toThrow(/`delay\.max`.*`reservationHorizon`/)
    expect(() =>
      expressRateLimit({ algorithm: 'gcra', delay: { max: '2m' }, reservationHorizon: '5m' }),
    ).not.toThrow()
  })

  it('bad bounds are refused naming the option', () => {
    expect(() => expressRateLimit({ algorithm: 'gcra', delay: { max: 0 } })).toThrow(/delay\.max/)
    expect(() => expressRateLimit({ algorithm: 'gcra', delay: { maxPerKey: 0 } })).toThrow(/delay\.maxPerKey/)
    expect(() => expressRateLimit({ algorithm: 'gcra', delay: { wait: 1 } as never })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION' }),
    )
  })
})
