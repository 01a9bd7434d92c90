/**
 * Redis going away under real HTTP traffic, through each adapter and each client: SIGKILL mid-stream, restart
 * on the same port, SCRIPT FLUSH and FLUSHALL. Every request must be answered, by the policy while Redis is
 * gone, and limiting must resume without restarting the app.
 */
import { MemoryStore, RedisStore } from '@ratewindow/core'
import request from 'supertest'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type CommonOptions, FRAMEWORKS, type RunningApp } from '../http/harness.js'
import { until } from '../support/connections.js'
import { recorder } from '../support/recorder.js'
import { CLIENT_FAMILIES, type Connected } from '../support/redis-clients.js'
import { RedisServer } from '../support/redis-server.js'
import { unhandledRejections } from '../support/unhandled.js'

const ADAPTERS = FRAMEWORKS.filter((framework) =>
  ['Express 5', 'Koa 3', 'Fastify 5'].includes(framework.name),
)
// ioredis through every adapter; each other client through one adapter, in turn: the adapter and the client are
// independent layers, and every pair would triple the time for nothing new.
const CASES = CLIENT_FAMILIES.flatMap((family, i) =>
  (i === 0 ? ADAPTERS : [ADAPTERS[i % ADAPTERS.length]!]).map((framework) => ({
    name: `${framework.name} and ${family.name}`,
    family,
    framework,
  })),
)
const unhandled = unhandledRejections()

/** True when the store (not the failure policy) answered: only then are RateLimit figures sent. */
const fromStore = (response: request.Response) => response.headers['ratelimit-limit'] !== undefined

async function untilStoreAnswers(url: string): Promise<number> {
  let attempts = 0
  await until(
    async () => {
      attempts++
      return fromStore(await request(url).get('/').timeout(5_000))
    },
    `the store answers ${url} again (limiting resumed)`,
    { within: 20_000, every: 50 },
  )
  return attempts
}

describe.each(CASES)('$name with RedisStore when Redis dies', ({ family, framework }) => {
  let server: RedisServer
  let connected: Connected | undefined
  let app: RunningApp | undefined
  const { errors, onError, clear } = recorder()
  let tests = 0

  beforeAll(async () => {
    server = await RedisServer.start()
  })
  afterEach(async () => {
    await app?.close()
    await connected?.close()
    clear()
  })
  afterAll(async () => {
    await server.stop()
    expect(unhandled).toEqual([])
  })

  async function start(options: CommonOptions): Promise<string> {
    if (!(await server.cli('ping')).includes('PONG')) await server.restart()
    // The client settings docs/redis.md recommends for this client: fail fast, reconnect quickly, never resend.
    connected = await family.standalone(server.port)
    app = await framework.start({
      global: {
        limit: 1_000,
        window: '1m',
        // A prefix per test: a command the test before queued while Redis was down, which a client may send
        // once it reconnects (CI saw valkey-glide's count one more for the next test's key), lands elsewhere.
        store: new RedisStore({ client: connected.client, prefix: `outage${tests++}` }),
        timeout: '200ms',
        onError,
        ...options,
      },
    })
    return app.url
  }

  it('SIGKILL mid-stream: every request answered (fail open), then limiting resumes after a restart', async () => {
    const url = await start({ onStoreError: 'allow' })
    for (let i = 0; i < 10; i++) expect(fromStore(await request(url).get('/').expect(200))).toBe(true)
    await server.kill('SIGKILL')
    const during = await Promise.all(Array.from({ length: 30 }, () => request(url).get('/').timeout(5_000)))
    expect(during.map((response) => response.status)).toEqual(Array(30).fill(200))
    expect(during.some(fromStore)).toBe(false) // nothing invented while the store is gone
    expect(errors.length).toBeGreaterThan(0) // and every failure was reported
    await server.restart()
    await untilStoreAnswers(url)
    const after = await request(url).get('/').expect(200)
    expect(Number(after.headers['ratelimit-remaining'])).toBeLessThan(1_000)
  })

  it('fail closed: 503 with Retry-After while Redis is down', async () => {
    const url = await start({ onStoreError: 'deny' })
    await request(url).get('/').expect(200)
    await server.kill('SIGKILL')
    const during = await Promise.all(Array.from({ length: 10 }, () => request(url).get('/').timeout(5_000)))
    expect(during.map((response) => response.status)).toEqual(Array(10).fill(503))
    expect(during.every((response) => Number(response.headers['retry-after']) >= 1)).toBe(true)
    await server.restart()
  })

  it('a fallback MemoryStore keeps limiting per process while Redis is down', async () => {
    const url = await start({ limit: 3, fallback: new MemoryStore() })
    await request(url).get('/').expect(200)
    await server.kill('SIGKILL')
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) statuses.push((await request(url).get('/').timeout(5_000)).status)
    expect(statuses).toEqual([200, 200, 200, 429, 429])
    await server.restart()
  })

  it('SCRIPT FLUSH and FLUSHALL mid-run: no error; FLUSHALL forgets the counts', async () => {
    // Its own recorder: a late report of the test before (a refund in doubt when its app closed) lands in the
    // shared one; and a generous timeout: this test is about the flushes, not about a loaded machine's latency.
    const own = recorder()
    const url = await start({ limit: 3, timeout: '5s', onError: own.onError })
    await request(url).get('/').expect(200)
    await server.cli('script', 'flush')
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(200)
    await request(url).get('/').expect(429)
    await server.cli('flushall')
    const fresh = await request(url).get('/').expect(200)
    expect(fresh.headers['ratelimit-remaining']).toBe('2')
    expect(own.errors).toEqual([])
  })
})
