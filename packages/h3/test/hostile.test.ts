/**
 * Hostile clients of `@ratewindow/h3`, written as the attacker sends them: raw HTTP requests against h3 2 and h3 1
 * apps served by Node (test/apps.ts). Nitro's built server gets the same middleware in test/runtimes/nitro.test.ts.
 */
import { connect } from 'node:net'
import { MemoryStore } from '@ratewindow/core'
import { rateLimit } from '@ratewindow/h3'
import type { H3Event } from 'h3'
import { afterAll, describe, expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'
import { holdStreams, MAJORS, releaseStreams, served } from './apps.js'

/** Every `RATEWINDOW_INVALID_ADDRESS` warning of this file: the warning is once per process. */
const warnings: Error[] = []
const onWarning = (warning: Error & { code?: string }) => {
  if (warning.code === 'RATEWINDOW_INVALID_ADDRESS') warnings.push(warning)
}
process.on('warning', onWarning)
afterAll(() => {
  process.off('warning', onWarning)
})

/** Sends `request` (raw HTTP/1.1 text) to `url`'s server; resolves with the status of its answer. */
async function raw(url: string, request: string): Promise<number> {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(await rawAnswer(url, request))?.[1] ?? 0)
}

/** Sends `request` (raw HTTP/1.1 text) to `url`'s server; resolves with its whole answer. */
function rawAnswer(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request))
    let answer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => {
      answer += chunk
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(answer))
  })
}

const get = (path: string, headers: string[] = []) =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers.map((line) => `${line}\r\n`).join('')}Connection: close\r\n\r\n`

describe.each(MAJORS)('%s', (major) => {
  it('a client rotating X-Forwarded-For and X-Real-IP on an app without trust is one client', async () => {
    const url = await served(major, rateLimit({ limit: 3, window: '1m' }))
    const statuses: number[] = []
    for (let i = 0; i < 6; i++)
      statuses.push(await raw(url, get('/', [`X-Forwarded-For: 192.0.2.${i}`, `X-Real-IP: 192.0.2.${i}`])))
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429])
  })

  it("`X-Forwarded-For: unknown` behind trustProxy is answered 500, counted nowhere, with one warning (h3's own xForwardedFor would key by it)", async () => {
    const store = new MemoryStore()
    const url = await served(major, rateLimit({ limit: 3, window: '1m', trustProxy: 1, store }))
    const statuses: number[] = []
    for (let i = 0; i < 10; i++)
      statuses.push(await raw(url, get('/', [`X-Forwarded-For: ${i % 2 ? 'unknown' : 'not an address'}`])))
    expect(new Set(statuses)).toEqual(new Set([500]))
    expect(warnings).toHaveLength(1)
    // A client with an address is decided as ever, and nothing was counted before it.
    const valid = await fetch(url, { headers: { 'x-forwarded-for': '203.0.113.7' } })
    expect([valid.status, valid.headers.get('ratelimit-remaining')]).toEqual([200, '2'])
  })

  it('odd spellings of a mounted path (percent-encoded, doubled slashes, dot segments, case) reach the route only limited', async () => {
    const url = await served(major, rateLimit({ limit: 3, window: '1m' }), '/api')
    const spellings = [
      '/api/data',
      '/%61pi/data',
      '/api/%64ata',
      '//api/data',
      '/api//data',
      '/api/./data',
      '/x/../api/data',
      '/API/data',
      '/api/data/',
      '/api/data?x=1',
      '/api/data#x',
      '/api%2Fdata',
    ]
    const reached: string[] = []
    for (const path of spellings) if ((await raw(url, get(path))) === 200) reached.push(path)
    // Whatever reaches the route counts for the client: 3 at most, however it is spelled.
    expect(reached.length).toBeLessThanOrEqual(3)
  })

  it("odd spellings of a path that `skip` reads from event.path (the README's recipe) reach the route only limited", async () => {
    const skip = (event: H3Event) => !event.path.startsWith('/api/')
    const url = await served(major, rateLimit<H3Event>({ limit: 100, window: '1m', skip }))
    const spellings = [
      '/api/data',
      '/%61pi/data',
      '//api/data',
      '/API/data',
      '/x/../api/data',
      '/api/./data',
      '/./api/data',
    ]
    const unlimited: string[] = []
    for (const path of spellings) {
      const answer = await rawAnswer(url, get(path))
      if (answer.startsWith('HTTP/1.1 200') && !/^ratelimit-limit:/im.test(answer)) unlimited.push(path)
    }
    expect(unlimited).toEqual([])
  })

  it('many keys: 100 forged client addresses behind trustProxy each get their own count, and an earlier client stays limited', async () => {
    const url = await served(major, rateLimit({ limit: 3, window: '1m', trustProxy: 1 }))
    const send = (client: string) => fetch(url, { headers: { 'x-forwarded-for': client } })
    for (let i = 0; i < 4; i++) await send('203.0.113.88')
    const statuses: number[] = []
    for (let batch = 0; batch < 5; batch++)
      statuses.push(
        ...(await Promise.all(
          Array.from({ length: 20 }, (_, i) => send(`10.${batch}.${i}.1`).then((each) => each.status)),
        )),
      )
    expect(new Set(statuses)).toEqual(new Set([200]))
    expect((await send('203.0.113.88')).status).toBe(429)
  })

  it('a concurrent flood of 60 at a limit of 3 admits exactly 3', async () => {
    const url = await served(major, rateLimit({ limit: 3, window: '1m' }))
    const statuses = await Promise.all(Array.from({ length: 60 }, () => raw(url, get('/'))))
    expect(statuses.filter((status) => status === 200)).toHaveLength(3)
    expect(statuses.filter((status) => status === 429)).toHaveLength(57)
  })
})

// Outside attack round of issue 50 (M2): on h3 2 the slot came back when the chain returned a streamed Response,
// so that 10 clients each reading a stream were all in flight at `concurrency: { limit: 2 }`.
// The second round (H1): h3 2's own helpers still got past it, their answers not being a Response or a
// ReadableStream: `iterable()` of a generator, `createEventStream()` returned, `new HTTPResponse(stream)` and a Node
// `Readable` each had 10 handlers in flight.
const H3_2_STREAMS = [
  '/stream',
  '/stream/raw',
  '/stream/iterable',
  '/stream/events',
  '/stream/h3-response',
  '/stream/node',
]

describe.each(MAJORS)('%s: concurrency: { limit: 2 } and streamed answers', (major) => {
  const paths = major === 'h3 2' ? H3_2_STREAMS : ['/stream']
  it.each(paths)(
    '10 clients reading %s at once were all admitted: 2 are, the rest 429 until a stream ends',
    async (path) => {
      holdStreams()
      const url = await served(major, rateLimit({ limit: 1000, window: '1h', concurrency: { limit: 2 } }))
      const first = await Promise.all([fetch(`${url}${path}`), fetch(`${url}${path}`)])
      expect(first.map((response) => response.status)).toEqual([200, 200])
      // Both streams sent their first chunk; their last is held.
      const readers = first.map((response) => response.body!.getReader())
      await Promise.all(readers.map((reader) => reader.read()))
      const more = await Promise.all(Array.from({ length: 8 }, () => raw(url, get(path))))
      expect(more).toEqual(Array(8).fill(429))
      releaseStreams()
      for (const reader of readers) while (!(await reader.read()).done);
      await until(
        async () => (await raw(url, get('/'))) === 200,
        'a request is admitted once both streams ended',
      )
    },
  )
})

describe('h3 2: streamed answers that are not sent', () => {
  // The second round (M1): HEAD requests of a streamed route held their slots until the lease ran out (a minute),
  // h3 dropping the body unread; the client got 429 with `Retry-After: 1` meanwhile.
  it.each(['/stream', '/stream/raw', '/stream/iterable', '/stream/node'])(
    'two HEAD requests of %s at `concurrency: { limit: 2 }` locked the client out for a minute: the next request is admitted',
    async (path) => {
      holdStreams()
      try {
        const url = await served('h3 2', rateLimit({ limit: 1000, window: '1h', concurrency: { limit: 2 } }))
        const head = `HEAD ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`
        expect([await raw(url, head), await raw(url, head)]).toEqual([200, 200])
        expect(await raw(url, get('/'))).toBe(200)
      } finally {
        releaseStreams()
      }
    },
  )

  // The second round: a generator behind `iterable()` that throws mid-stream was judged a success, so that
  // `skipFailedRequests` refunded nothing (200, 200, 200, 429, 429, 429).
  it('six requests of a stream that fails mid-way, at limit 3 with `skipFailedRequests`: each is refunded', async () => {
    const url = await served('h3 2', rateLimit({ limit: 3, window: '1h', skipFailedRequests: true }))
    const statuses: number[] = []
    for (let i = 0; i < 6; i++) {
      holdStreams()
      const response = await fetch(`${url}/stream/iterable-fails`)
      statuses.push(response.status)
      // Its first chunk came; the stream fails in place of the last, and the server ends the connection.
      releaseStreams()
      await expect(response.text()).rejects.toThrow()
    }
    expect(statuses).toEqual(Array(6).fill(200))
  })
})
