/**
 * Hostile clients of `@ratewindow/elysia`, written as the attacker sends them (raw HTTP where the shape of the
 * request is the attack), against a real Elysia app served on Node by `@elysiajs/node`. The same plugin on Bun runs
 * in test/runtimes/elysia.test.ts. Each test is named after what it would break.
 */
import { connect } from 'node:net'
import { node } from '@elysiajs/node'
import { MemoryStore, type Store } from '@ratewindow/core'
import { type ElysiaRateLimitOptions, rateLimit } from '@ratewindow/elysia'
import { Elysia } from 'elysia'
import { afterAll, describe, expect, it } from 'vitest'
import { freePort } from '../../../test/runtimes/project.js'
import { until } from '../../../test/support/connections.js'

/** Every `RATEWINDOW_INVALID_ADDRESS` warning of this file: the warning is once per process. */
const warnings: Error[] = []
const onWarning = (warning: Error & { code?: string }) => {
  if (warning.code === 'RATEWINDOW_INVALID_ADDRESS') warnings.push(warning)
}
process.on('warning', onWarning)

const stops: (() => unknown)[] = []
afterAll(async () => {
  process.off('warning', onWarning)
  for (const stop of stops.splice(0)) await stop()
})

/** A memory store whose charges are counted on the way through. */
function countedStore(options?: ConstructorParameters<typeof MemoryStore>[0]) {
  let consumed = 0
  const memory = new MemoryStore(options)
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
  }) as Store
  return { store, memory, consumed: () => consumed }
}

/** An app with the plugin on every route, served on a free port; `errors` counts what reached `onError`. */
async function served(options: ElysiaRateLimitOptions, routes: (app: Elysia) => unknown = (app) => app) {
  let errors = 0
  const port = await freePort()
  const limiter = rateLimit({ onError: () => {}, ...options })
  const app = new Elysia({ adapter: node() })
    .onError(({ code }) => {
      if (code === 'UNKNOWN') errors++
    })
    .get('/ready', () => 'ready')
    .use(limiter)
    .get('/', () => 'ok')
    .get('/users/:id', ({ params }) => `user ${params.id}`)
  routes(app as unknown as Elysia)
  await new Promise<void>((resolve) => app.listen({ port, hostname: '127.0.0.1' }, () => resolve()))
  const url = `http://127.0.0.1:${port}`
  await until(
    () =>
      fetch(`${url}/ready`).then(
        (response) => response.ok,
        () => false,
      ),
    'the app answers',
  )
  stops.push(() => limiter.close())
  stops.push(() => (app.server as unknown as { raw?: { close(): Promise<void> } } | null)?.raw?.close())
  return { url, errors: () => errors }
}

/** Sends `raw` on a connection of its own; resolves with everything the server answered until it closed. */
function rawRequest(url: string, raw: string): Promise<string> {
  const { port } = new URL(url)
  return new Promise((resolve, reject) => {
    let received = ''
    const socket = connect(Number(port), '127.0.0.1', () => socket.end(raw))
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      received += chunk
    })
    socket.on('close', () => resolve(received))
    socket.on('error', reject)
  })
}

const statusesOf = (answers: string) =>
  [...answers.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((match) => Number(match[1]))

describe('without trustProxy', () => {
  it('a client rotating spoofed X-Forwarded-For values got a fresh limit with each (20 spoofed addresses)', async () => {
    const { url } = await served({ limit: 5, window: '1h' })
    const statuses: number[] = []
    for (let i = 0; i < 20; i++)
      statuses.push((await fetch(`${url}/`, { headers: { 'X-Forwarded-For': `198.51.100.${i}` } })).status)
    expect(statuses.filter((status) => status === 200)).toHaveLength(5)
  })

  it('forged paths (dot segments, doubled slashes, encoded, queries, fragments) were counted apart', async () => {
    const { url } = await served({ limit: 4, window: '1h' })
    const paths = [
      '/users/1',
      '/users/1/',
      '/users/%31',
      '/users/1?x=1',
      '/users/./1',
      '//users/1',
      '/users/1#x',
    ]
    const statuses: number[] = []
    // Each as the client wrote it, on a connection of its own: Elysia routes or refuses each, and every one it
    // routes is counted against the one client.
    for (const path of paths)
      statuses.push(
        ...statusesOf(
          await rawRequest(url, `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`),
        ),
      )
    expect(statuses).toHaveLength(paths.length)
    expect(statuses.filter((status) => status === 200).length).toBeLessThanOrEqual(4)
    expect((await fetch(`${url}/users/1`)).status).toBe(429)
  })
})

describe('with trustProxy: 1', () => {
  it('`X-Forwarded-For: unknown` reached the error handler with a stack trace per request (20 requests)', async () => {
    const { store, consumed } = countedStore()
    const { url, errors } = await served({ limit: 5, window: '1h', trustProxy: 1, store })
    const answers = new Set<string>()
    for (let i = 0; i < 20; i++) {
      const response = await fetch(`${url}/`, {
        headers: { 'X-Forwarded-For': i % 2 ? 'unknown' : 'not an address' },
      })
      answers.add(`${response.status} ${await response.text()}`)
    }
    // Answered 500 by the plugin, with no detail; nothing counted, the error handler never called.
    expect(answers).toEqual(new Set(['500 Internal Server Error']))
    expect(errors()).toBe(0)
    expect(consumed()).toBe(0)
    await until(() => warnings.length === 1, 'one RATEWINDOW_INVALID_ADDRESS warning')
    expect(warnings[0]!.message).toMatch(/Not an IP address.*`trustProxy`.*answered 500/)
    const valid = await fetch(`${url}/`, { headers: { 'X-Forwarded-For': '203.0.113.7' } })
    expect([valid.status, await valid.text()]).toEqual([200, 'ok'])
    expect(consumed()).toBe(1)
  })

  it('a client prepending entries to X-Forwarded-For chose its own key (the entry the proxy wrote is the last)', async () => {
    const { url } = await served({ limit: 2, window: '1h', trustProxy: 1 })
    const statuses: number[] = []
    for (let i = 0; i < 6; i++)
      statuses.push(
        (await fetch(`${url}/`, { headers: { 'X-Forwarded-For': `10.0.0.${i}, 203.0.113.9` } })).status,
      )
    expect(statuses).toEqual([200, 200, 429, 429, 429, 429])
  })

  it('300 forged client addresses grew the memory store past its maxKeys', async () => {
    const { store, memory } = countedStore({ maxKeys: 50 })
    const { url } = await served({ limit: 1, window: '1h', trustProxy: 1, store })
    for (let batch = 0; batch < 3; batch++)
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          fetch(`${url}/`, { headers: { 'X-Forwarded-For': `10.${batch}.${i >> 8}.${i & 255}` } }).then(
            (response) => response.status,
          ),
        ),
      )
    expect(memory.size).toBeLessThanOrEqual(50)
    expect((await fetch(`${url}/`, { headers: { 'X-Forwarded-For': '203.0.113.99' } })).status).toBe(200)
  })

  it('60 concurrent requests at the limit of 20 were admitted past it', async () => {
    const { url } = await served({ limit: 20, window: '1h', trustProxy: 1 })
    const statuses = await Promise.all(
      Array.from({ length: 60 }, () =>
        fetch(`${url}/`, { headers: { 'X-Forwarded-For': '203.0.113.60' } }).then(
          (response) => response.status,
        ),
      ),
    )
    expect(statuses.filter((status) => status === 200)).toHaveLength(20)
  })
})

/**
 * Streams whose chunks wait on the test: each one sends a first chunk, then its last when `release()` is called,
 * and counts itself in flight until it has ended (or its client left).
 */
function heldStreams() {
  let inFlight = 0
  let maxInFlight = 0
  let release!: () => void
  let released = new Promise<void>((resolve) => {
    release = resolve
  })
  const enter = () => {
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
  }
  const routes = (app: Elysia) =>
    app
      // Elysia's own streaming: a generator handler.
      .get('/stream', async function* () {
        enter()
        const gate = released
        try {
          yield 'first\n'
          await gate
          yield 'last\n'
        } finally {
          inFlight--
        }
      })
      // A Response over a ReadableStream (a proxied model's answer).
      .get('/sse', () => {
        enter()
        const gate = released
        let sent = 0
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            if (sent++ > 0) await gate
            if (sent > 2) {
              inFlight--
              return controller.close()
            }
            controller.enqueue(new TextEncoder().encode(`chunk ${sent}\n`))
          },
          cancel() {
            inFlight--
          },
        })
        return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
      })
  return {
    routes,
    release: () => {
      release()
      released = new Promise<void>((resolve) => {
        release = resolve
      })
    },
    inFlight: () => inFlight,
    maxInFlight: () => maxInFlight,
  }
}

/** Reads a response's body until its first chunk has come. */
async function firstChunk(response: Response) {
  const reader = response.body!.getReader()
  await reader.read()
  return reader
}

// Outside attack round of issue 50 (H1): the slot came back at `onAfterResponse`, with the first chunk, so that
// 10 clients each reading a 3 s stream were all admitted at `concurrency: { limit: 2 }`, on Node and on Bun.
describe('concurrency: { limit: 2 } and streamed answers', () => {
  for (const path of ['/stream', '/sse'])
    it(`10 clients reading ${path} at once were all admitted (10 in flight): 2 are, the rest 429 until a stream ends`, async () => {
      const streams = heldStreams()
      const { url } = await served({ limit: 1000, window: '1h', concurrency: { limit: 2 } }, streams.routes)
      const first = await Promise.all([fetch(`${url}${path}`), fetch(`${url}${path}`)])
      expect(first.map((response) => response.status)).toEqual([200, 200])
      const readers = await Promise.all(first.map(firstChunk))
      // Both streams are running: their first chunks came, their last are held.
      const more = await Promise.all(Array.from({ length: 8 }, () => fetch(`${url}${path}`)))
      expect(more.map((response) => response.status)).toEqual(Array(8).fill(429))
      expect(streams.maxInFlight()).toBe(2)
      streams.release()
      for (const reader of readers) while (!(await reader.read()).done);
      // Both ended: their slots are back.
      await until(
        async () => (await fetch(`${url}/`)).status === 200,
        'a request is admitted once both streams ended',
      )
      expect(streams.maxInFlight()).toBe(2)
    })

  it('a client that leaves mid-stream: its slot comes back once the handler stops, not before, and not never', async () => {
    const streams = heldStreams()
    const { url } = await served({ limit: 1000, window: '1h', concurrency: { limit: 1 } }, streams.routes)
    const leaving = new AbortController()
    const reader = await firstChunk(await fetch(`${url}/stream`, { signal: leaving.signal }))
    leaving.abort()
    await reader.cancel().catch(() => {})
    // The generator is still at work (awaiting its last chunk): the slot bounds work in flight.
    expect((await fetch(`${url}/`)).status).toBe(429)
    streams.release()
    await until(
      async () => (await fetch(`${url}/`)).status === 200,
      'the slot comes back once the generator of the client that left has stopped',
    )
    expect(streams.inFlight()).toBe(0)
  })
})
