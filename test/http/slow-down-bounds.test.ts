/**
 * Issue 32, items 7 and 8: what one client can hold in `slowDown()`, in every adapter on a real server. A client
 * that pipelines requests on one HTTP/1.1 connection and leaves holds nothing afterwards and runs no handler
 * (item 7); delayed requests are bounded per key and per middleware, past which one is answered 429 (item 8).
 * Delays run on driven timers: nothing here waits on time, and a wait for the server is bounded (`until`).
 */
import type { Socket } from 'node:net'
import { type DecisionOutcome, MemoryStore } from '@ratewindow/core'
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { pipelined, until } from '../support/connections.js'
import { ManualTimers } from '../support/timers.js'
import { connectionsClosed, headerOf } from './harness.js'
import { type CommonSlowDownOptions, call, SLOW_FRAMEWORKS, type SlowApp } from './slow-down-harness.js'

const apps: SlowApp[] = []
/** The clients of the test's requests: whatever still waits when the test ends is aborted, so the apps close. */
const clients: AbortController[] = []
afterEach(async () => {
  for (const client of clients.splice(0)) client.abort()
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

/** A request on a connection of its own; answered, or undefined when the test ended first. */
function send(url: string, headers: Record<string, string> = {}): Promise<Response | undefined> {
  const client = new AbortController()
  clients.push(client)
  return fetch(url, { headers, signal: client.signal }).catch(() => undefined)
}

describe.each(SLOW_FRAMEWORKS)('$name', (framework) => {
  /** The app on driven timers, and the outcome of each decision its observer heard, in order. */
  async function start(options: CommonSlowDownOptions) {
    const timers = new ManualTimers(new ManualClock())
    const outcomes: DecisionOutcome[] = []
    const app = await framework.start({
      store: new MemoryStore(),
      timers,
      observer: { onDecision: (event) => void outcomes.push(event.outcome) },
      ...options,
    })
    apps.push(app)
    const count = (outcome: DecisionOutcome) => outcomes.filter((each) => each === outcome).length
    return { app, timers, outcomes, count }
  }

  it('a client that pipelines 200 requests on one connection and leaves: its 200 waits are released, and none of its handlers runs', async () => {
    const pipelinedCount = 200
    const { app, timers, count } = await start({
      delayAfter: 0,
      delayMs: 60_000,
      maxPerKey: false,
      maxWaiting: false,
    })
    const client = await pipelined(app.url, pipelinedCount)
    await until(
      () => count('delayed') === pipelinedCount,
      () => `${pipelinedCount} pipelined requests are delayed (${count('delayed')} are)`,
    )
    // Every delayed request of the process waits on one timer.
    expect(timers.pending).toBe(1)
    await client.close()
    // The last wait taken out of the queue clears its timer.
    await until(
      () => timers.pending === 0,
      () => `the waits of the gone client are released (${timers.pending} timer pending)`,
    )
    timers.advance(120_000)
    // A request of another connection, the same client key, afterwards: the only handler that runs.
    const after = await call(app, timers)
    expect([after.status, after.waited, app.handled]).toEqual([200, 60_000, 1])
  })

  it('with the default bounds, a pipelining connection holds 10 waits; the rest are refused, and its leaving releases the 10', async () => {
    const pipelinedCount = 30
    const { app, timers, count } = await start({ delayAfter: 0, delayMs: 60_000 })
    const client = await pipelined(app.url, pipelinedCount)
    await until(
      () => count('delayed') + count('shed') === pipelinedCount,
      () =>
        `${pipelinedCount} pipelined requests are decided (${count('delayed')} delayed, ${count('shed')} shed)`,
    )
    expect([count('delayed'), count('shed')]).toEqual([10, 20])
    await client.close()
    await until(
      () => timers.pending === 0,
      () => `the waits of the gone client are released (${timers.pending} timer pending)`,
    )
    timers.advance(120_000)
    // Its places are free again: the same key is delayed, not refused.
    const after = await call(app, timers)
    expect([after.status, after.waited, app.handled]).toEqual([200, 60_000, 1])
  })

  it('a client that pipelines 4,000 requests, so that the server stops reading its connection, and leaves: of its 10 delayed handlers, only the one at the head of the connection runs when the delays end (10 before issue 32)', async () => {
    const { app, timers, count } = await start({ delayAfter: 0, delayMs: 60_000 })
    const sockets: Socket[] = []
    app.server.on('connection', (socket: Socket) => void sockets.push(socket))
    const client = await pipelined(app.url, 4_000)
    // The 429s queued behind the delayed requests pass Node's high-water mark: it stops reading the connection,
    // and with it the client's leaving (its close is read only once reading resumes).
    await until(
      () => count('delayed') === 10 && sockets[0]?.isPaused() === true,
      () =>
        `the server stops reading the connection with 10 requests delayed (${count('delayed')} delayed, ${count('shed')} shed, paused: ${sockets[0]?.isPaused()})`,
    )
    await client.close()
    timers.advance(60_000)
    // The delays end on the stalled connection: the request at its head runs (answering it is what resumes the
    // connection); each of the others waits up to 5 s for Node to read it again, then is answered 429, or is
    // dropped once the connection's close is heard.
    timers.advance(5_000)
    await connectionsClosed(app)
    expect(app.handled).toBe(1)
    // The places are free again: the same key is delayed, not refused, and its handler runs.
    const after = await call(app, timers)
    expect([after.status, after.waited, app.handled]).toEqual([200, 60_000, 2])
  })

  it('a client that stays on its stalled connection gets an answer to each of its 4,000 requests: the delayed ones whose delay ends while it is stalled are answered 429', async () => {
    const pipelinedCount = 4_000
    const { app, timers } = await start({ delayAfter: 0, delayMs: 60_000 })
    const client = await pipelined(app.url, pipelinedCount)
    const statuses = () => [...client.received().matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((each) => each[1])
    // Each round: the delays end, and the answers let the server read on (and delay the next 10).
    for (let round = 0; statuses().length < pipelinedCount; round++) {
      expect(round, 'rounds of delays').toBeLessThan(pipelinedCount)
      await until(
        () => timers.pending > 0 || statuses().length === pipelinedCount,
        () => `a request is delayed, or every request is answered (${statuses().length} answered)`,
      )
      timers.advance(60_000)
    }
    const answered = statuses()
    expect(answered.filter((status) => status !== '200' && status !== '429')).toEqual([])
    expect(answered.filter((status) => status === '200').length).toBe(app.handled)
    await client.close()
  })

  it('the 11th delayed request of one key is answered 429, with Retry-After the delay it would have waited and the default body; the 10 go on', async () => {
    const { app, timers, outcomes, count } = await start({ delayAfter: 0, delayMs: 2_500 })
    const waiting = Array.from({ length: 10 }, () => send(app.url))
    await until(
      () => count('delayed') === 10,
      () => `10 requests are delayed (${count('delayed')} are)`,
    )
    const eleventh = send(app.url)
    await until(() => outcomes.length === 11, 'the 11th request is decided')
    expect([count('delayed'), count('shed')]).toEqual([10, 1])
    const refused = (await eleventh)!
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('3')
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/)
    expect(await refused.json()).toEqual({
      error: 'Too Many Requests',
      message: 'Too many requests: retry in 3 seconds.',
      retryAfter: 3,
    })
    expect(app.handled).toBe(0)
    timers.advance(2_500)
    expect((await Promise.all(waiting)).map((each) => each?.status)).toEqual(Array(10).fill(200))
    expect(app.handled).toBe(10)
  })

  it('maxPerKey counts per key, maxWaiting for every key together', async () => {
    const { app, timers, count } = await start({
      delayAfter: 0,
      delayMs: 1_000,
      maxPerKey: 1,
      maxWaiting: 2,
      keyGenerator: ((request: unknown) => headerOf(request, 'x-user') ?? 'anonymous') as never,
    })
    const as = (user: string) => send(app.url, { 'x-user': user })
    const first = as('a')
    await until(() => count('delayed') === 1, 'the first request of a is delayed')
    expect((await as('a'))?.status).toBe(429)
    const second = as('b')
    await until(() => count('delayed') === 2, 'the first request of b is delayed')
    expect((await as('c'))?.status).toBe(429)
    timers.advance(1_000)
    expect([(await first)?.status, (await second)?.status]).toEqual([200, 200])
  })
})
