/**
 * Issue 32: `wait()` and `schedule()` call someone else's API, so a store failure refuses them unless the caller
 * opts in with `onStoreError: 'allow'` (on the limiter, or per call); a `fallback` still answers. `limit()` keeps
 * its policy. On a real redis-server, stopped (SIGSTOP: it keeps its connections and answers nothing) or killed.
 */
import { once } from 'node:events'
import { gcra, MemoryStore, RateLimiter, type RateLimiterOptions, RedisStore } from '@ratewindow/core'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { RedisServer } from '../support/redis-server.js'
import { unhandledRejections } from '../support/unhandled.js'

const unhandled = unhandledRejections()
const CALLS = 40

describe('wait() and schedule() when Redis fails (issue 32)', () => {
  let server: RedisServer
  let client: Redis
  let pid = 0

  beforeAll(async () => {
    server = await RedisServer.start()
    pid = Number(/process_id:(\d+)/.exec(await server.cli('info', 'server'))![1])
  })
  afterEach(() => {
    // A test that failed must not leave the server stopped for the next one.
    process.kill(pid, 'SIGCONT')
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
    expect(unhandled).toEqual([])
  })

  function connect(): Redis {
    client?.disconnect()
    client = new Redis({
      host: '127.0.0.1',
      port: server.port,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => 50,
    })
    client.on('error', () => {}) // expected while the server is stopped or gone
    return client
  }

  /** 10 a second on the server, the store failing fast; `more` for the policy under test. */
  async function limiter(more: Partial<RateLimiterOptions> = {}) {
    const redis = connect()
    await once(redis, 'ready')
    return new RateLimiter({
      rules: gcra({ limit: 10, window: '1s', burst: 1 }),
      store: new RedisStore({ client: redis }),
      prefix: `wait-outage-${Math.random().toString(36).slice(2)}`,
      timeout: '100ms',
      onError: () => {},
      ...more,
    })
  }

  /** `CALLS` waits while Redis is stopped: how many started (resolved) and how many were refused, by code. */
  async function duringStall(api: RateLimiter, options: Parameters<RateLimiter['wait']>[1] = {}) {
    process.kill(pid, 'SIGSTOP')
    try {
      const settled = await Promise.allSettled(
        Array.from({ length: CALLS }, () => api.wait('partner', options)),
      )
      const started = settled.filter((each) => each.status === 'fulfilled')
      const codes = settled.flatMap((each) =>
        each.status === 'rejected' ? [(each.reason as { code?: string }).code] : [],
      )
      return { started: started.length, refused: codes.length, codes: [...new Set(codes)] }
    } finally {
      process.kill(pid, 'SIGCONT')
    }
  }

  it('stopped (SIGSTOP), with the default onStoreError: every wait and schedule refuses, none starts', async () => {
    const api = await limiter()
    expect(await duringStall(api)).toEqual({ started: 0, refused: CALLS, codes: ['ERR_RATEWINDOW_STORE'] })
    let called = 0
    process.kill(pid, 'SIGSTOP')
    try {
      await expect(api.schedule('partner', () => called++)).rejects.toMatchObject({
        code: 'ERR_RATEWINDOW_STORE',
        message: expect.stringContaining("onStoreError: 'allow'"),
      })
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    expect(called).toBe(0)
    // limit() keeps the limiter's policy (allow by default): a request the app answers itself.
    process.kill(pid, 'SIGSTOP')
    try {
      expect(await api.limit('partner')).toMatchObject({ allowed: true, source: 'policy' })
    } finally {
      process.kill(pid, 'SIGCONT')
    }
  })

  it("opting in: onStoreError 'allow' set on the limiter, or on the call, lets every wait through at once", async () => {
    expect(await duringStall(await limiter({ onStoreError: 'allow' }))).toMatchObject({ started: CALLS })
    expect(await duringStall(await limiter(), { onStoreError: 'allow' })).toMatchObject({ started: CALLS })
    // The call's choice wins over the limiter's.
    expect(
      await duringStall(await limiter({ onStoreError: 'allow' }), { onStoreError: 'deny' }),
    ).toMatchObject({
      started: 0,
    })
  })

  it('a fallback store still answers: the waits take slots in it (this process only)', async () => {
    const api = await limiter({ fallback: new MemoryStore() })
    process.kill(pid, 'SIGSTOP')
    try {
      const results = await Promise.all(Array.from({ length: 3 }, () => api.wait('partner')))
      expect(results.map((result) => result.source)).toEqual(['fallback', 'fallback', 'fallback'])
      // Slots 100 ms apart in the fallback (each decided a moment after the one before).
      const [first, second, third] = results.map((result) => result.delay ?? 0)
      expect([first, second! > 0, third! > second!]).toEqual([0, true, true])
    } finally {
      process.kill(pid, 'SIGCONT')
    }
  })

  it('killed: every wait refuses until Redis is back', async () => {
    const api = await limiter()
    await server.kill()
    try {
      const settled = await Promise.allSettled(Array.from({ length: CALLS }, () => api.wait('partner')))
      expect(settled.filter((each) => each.status === 'fulfilled')).toHaveLength(0)
    } finally {
      await server.restart()
      pid = Number(/process_id:(\d+)/.exec(await server.cli('info', 'server'))![1])
    }
  })
})
