/**
 * Hostile clients (issue 45) of `@ratewindow/hono`, written as the attacker wrote them: raw HTTP requests against
 * a real Hono server on `@hono/node-server`, with `getConnInfo` and `trustProxy` as behind one proxy. Each test is
 * named after what broke.
 */
import type { Server } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { MemoryStore, type Store } from '@ratewindow/core'
import { rateLimit, slowDown } from '@ratewindow/hono'
import { Hono, type MiddlewareHandler } from 'hono'
import { stream } from 'hono/streaming'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'

/** Every `RATEWINDOW_INVALID_ADDRESS` warning of this file: the warning is once per process. */
const warnings: Error[] = []
const onWarning = (warning: Error & { code?: string }) => {
  if (warning.code === 'RATEWINDOW_INVALID_ADDRESS') warnings.push(warning)
}
process.on('warning', onWarning)
afterAll(() => {
  process.off('warning', onWarning)
})

const servers: Server[] = []
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

/** A memory store whose charges are counted on the way through. */
function countedStore(): { store: Store; consumed: () => number } {
  let consumed = 0
  const memory = new MemoryStore()
  const store = new Proxy(memory, {
    get(target, name) {
      const value = Reflect.get(target, name, target)
      if (typeof value !== 'function') return value
      if (name !== 'consume') return value.bind(target)
      return (...args: unknown[]) => {
        consumed++
        return value.apply(target, args)
      }
    },
  })
  return { store, consumed: () => consumed }
}

/** A Hono app behind one proxy, the middleware on every route; `errors` counts what reached `onError`. */
async function started(middleware: MiddlewareHandler): Promise<{ url: string; errors: () => number }> {
  let errors = 0
  const app = new Hono()
  app.onError((_error, c) => {
    errors++
    return c.text('error handler', 500)
  })
  app.use(middleware)
  app.get('/', (c) => c.text('ok'))
  // Two chunks: the first at once, the last once `releaseStreams()` is called.
  app.get('/stream', () => {
    let sent = 0
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sent++ > 0) await released
        if (sent > 2) return controller.close()
        controller.enqueue(new TextEncoder().encode(`chunk ${sent}\n`))
      },
    })
    return new Response(body)
  })
  // Hono's stream() helper, written as the README says: the callback stops when its client leaves (onAbort).
  app.get('/push', (c) =>
    stream(c, async (writer) => {
      pushing.now++
      pushing.most = Math.max(pushing.most, pushing.now)
      try {
        const left = new Promise<void>((resolve) => writer.onAbort(resolve))
        await writer.write('chunk 1\n')
        await Promise.race([released, left])
        if (!writer.aborted) await writer.write('chunk 2\n')
      } finally {
        pushing.now--
      }
    }),
  )
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server
  servers.push(server)
  await new Promise((resolve) => server.once('listening', resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, errors: () => errors }
}

const REQUESTS = 20

/** The `/push` callbacks running now, and the most that ran at once. */
const pushing = { now: 0, most: 0 }

/** A GET of `path` on a connection of its own, closed once the first chunk came; resolves with the status. */
function leaveAfterFirstChunk(url: string, path: string): Promise<number> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () =>
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`),
    )
    let answer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => {
      answer += chunk
      if (answer.includes('chunk 1') || (answer.includes('\r\n\r\n') && !answer.startsWith('HTTP/1.1 200'))) {
        socket.destroy()
        resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0))
      }
    })
    socket.on('error', reject)
  })
}

let releaseStreams = () => {}
let released = Promise.resolve()
/** Holds the last chunk of every `/stream` answer until `releaseStreams()`. */
function holdStreams(): void {
  released = new Promise<void>((resolve) => {
    releaseStreams = resolve
  })
}

describe.each([
  ['rateLimit', (store: Store) => rateLimit({ getConnInfo, trustProxy: 1, limit: 5, window: '1h', store })],
  [
    'slowDown',
    (store: Store) =>
      slowDown({ getConnInfo, trustProxy: 1, delayAfter: 5, delayMs: 0, windowMs: 60_000, store }),
  ],
] as const)('%s with trustProxy', (_, make) => {
  it('`X-Forwarded-For: unknown` threw ERR_RATEWINDOW_INVALID_IP into the error handler on every request (20 stack traces)', async () => {
    const { store, consumed } = countedStore()
    const { url, errors } = await started(make(store))
    const answers: string[] = []
    for (let i = 0; i < REQUESTS; i++) {
      const response = await fetch(url, {
        headers: { 'X-Forwarded-For': i % 2 ? 'unknown' : 'not an address' },
      })
      answers.push(`${response.status} ${await response.text()}`)
    }
    // Answered 500 by the middleware, with no detail; nothing counted, the error handler never called.
    expect(new Set(answers)).toEqual(new Set(['500 Internal Server Error']))
    expect(errors()).toBe(0)
    expect(consumed()).toBe(0)
    await new Promise((resolve) => setImmediate(resolve))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]!.message).toMatch(/Not an IP address.*`trustProxy`.*answered 500/)
    // A client with an address is decided as ever.
    const valid = await fetch(url, { headers: { 'X-Forwarded-For': '203.0.113.7' } })
    expect([valid.status, await valid.text()]).toEqual([200, 'ok'])
    expect(consumed()).toBe(1)
  })
})

// Found beside the outside attack round of issue 50 (H1 on Elysia): the slot came back when the handler returned
// its Response, so that a client ran any number of streams (a model's answer) at `concurrency: { limit: 2 }`.
describe('concurrency: { limit: 2 } and a streamed body', () => {
  it('10 clients reading a stream at once were all admitted: 2 are, the rest 429 until a stream ends', async () => {
    holdStreams()
    const { url } = await started(
      rateLimit({ getConnInfo, limit: 1000, window: '1h', concurrency: { limit: 2 } }),
    )
    const first = await Promise.all([1, 2].map(() => fetch(`${url}stream`)))
    expect(first.map((response) => response.status)).toEqual([200, 200])
    const readers = first.map((response) => response.body!.getReader())
    await Promise.all(readers.map((reader) => reader.read()))
    const more = await Promise.all(Array.from({ length: 8 }, () => fetch(`${url}stream`)))
    expect(more.map((response) => response.status)).toEqual(Array(8).fill(429))
    releaseStreams()
    for (const reader of readers) while (!(await reader.read()).done);
    await until(
      async () => (await fetch(url)).status === 200,
      'a request is admitted once both streams ended',
    )
  })
})

// The second outside attack round of issue 50 (H2, rated Medium: the README's contract): 8 rounds of 2 clients that
// each close their connection once a stream()'s first chunk came reached 16 callbacks at once at limit 2, Hono's
// stream() writing on, unheard, for clients long gone. The slot comes back when the client leaves; a callback that
// stops on onAbort, as the README says, keeps the work within the limit.
describe('concurrency: { limit: 2 } and clients that leave a stream() mid-way', () => {
  it('8 rounds of 2 clients leaving after the first chunk: each round admitted, at most 2 callbacks at once', async () => {
    holdStreams()
    pushing.most = 0
    try {
      const { url } = await started(
        rateLimit({ getConnInfo, limit: 1000, window: '1h', concurrency: { limit: 2 } }),
      )
      for (let round = 0; round < 8; round++) {
        const statuses = await Promise.all([1, 2].map(() => leaveAfterFirstChunk(url, '/push')))
        expect(statuses).toEqual([200, 200])
        await until(async () => pushing.now === 0, `round ${round + 1}'s callbacks stopped`)
        await until(async () => (await fetch(url)).status === 200, `round ${round + 1}'s slots came back`)
      }
      expect(pushing.most).toBe(2)
    } finally {
      releaseStreams()
    }
  })
})
