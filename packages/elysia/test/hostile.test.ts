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
async function served(options: ElysiaRateLimitOptions) {
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
