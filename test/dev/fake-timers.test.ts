/**
 * Tests written as users write them: `vi.useFakeTimers()`, node-redis (the recommended client) and a memory store
 * built before the fake timers (issue 21, item 2). See docs/testing.md.
 */
import { MemoryStore, RateLimiter, RedisStore, slidingWindowCounter } from '@ratewindow/core'
import { rateLimit, slowDown } from '@ratewindow/express'
import express from 'express'
import { createClient } from 'redis'
import request from 'supertest'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { redisEnvironment } from '../support/redis.js'

afterEach(() => {
  vi.useRealTimers()
})

// Built at module level, before any test fakes time: the layout of an app module imported by a test file.
const sharedStore = new MemoryStore()
afterAll(() => sharedStore.close())

async function nodeRedis() {
  const client = createClient({ socket: { host: '127.0.0.1', port: redisEnvironment().standalonePort } })
  await client.connect()
  return client
}

function appOn(store: RedisStore, onError?: (error: unknown) => void) {
  const app = express()
  const limiter = rateLimit({ limit: 2, window: '1m', store, ...(onError ? { onError } : {}) })
  app.use(limiter)
  app.get('/', (_request, response) => {
    response.send('ok')
  })
  return { app, limiter }
}

describe('fake timers', () => {
  it('a MemoryStore built before vi.useFakeTimers() follows fake time', async () => {
    vi.useFakeTimers()
    const limiter = new RateLimiter({
      rules: slidingWindowCounter({ limit: 2, window: '1m' }),
      store: sharedStore,
    })
    expect((await limiter.limit('client')).allowed).toBe(true)
    expect((await limiter.limit('client')).allowed).toBe(true)
    expect((await limiter.limit('client')).allowed).toBe(false)
    vi.advanceTimersByTime(120_000)
    expect((await limiter.limit('client')).allowed).toBe(true)
    limiter.release()
  })

  it('with plain vi.useFakeTimers() and node-redis, requests are answered after `timeout` (real time), and onError says why Redis got nothing', async () => {
    const client = await nodeRedis()
    const errors: string[] = []
    try {
      vi.useFakeTimers()
      const store = new RedisStore({ client, prefix: `fake-timers-all-${process.pid}:` })
      const { app } = appOn(store, (error) => errors.push((error as Error).message))
      // node-redis schedules its writes with setImmediate, faked here: the limiter's own timeout (real time)
      // answers by the failure policy instead of hanging.
      expect((await request(app).get('/')).status).toBe(200)
      expect(errors[0]).toMatch(/Fake timers replace setImmediate.*toFake: \['Date'\]/)
    } finally {
      vi.useRealTimers()
      // The faked write was dropped with the fake timers: this client can send nothing more.
      client.destroy()
    }
  })

  it("counts on node-redis under vi.useFakeTimers({ toFake: ['Date'] }), as docs/testing.md says", async () => {
    const client = await nodeRedis()
    try {
      vi.useFakeTimers({ toFake: ['Date'] })
      const store = new RedisStore({ client, prefix: `fake-timers-date-${process.pid}:` })
      const { app } = appOn(store)
      const statuses: number[] = []
      for (let i = 0; i < 3; i++) statuses.push((await request(app).get('/')).status)
      expect(statuses).toEqual([200, 200, 429])
    } finally {
      vi.useRealTimers()
      await client.quit()
    }
  })
})

describe('slowDown() under supertest and fake timers (issue 32, item 18: the recipe of docs/slow-down.md)', () => {
  it('a delayed request answers once the test advances fake time by its delay', async () => {
    vi.useFakeTimers()
    const app = express()
    const slower = slowDown({ delayAfter: 2, delayMs: 500 })
    app.use(slower)
    app.get('/', (req, res) => {
      res.json({ delay: req.slowDown?.delay })
    })
    try {
      await request(app).get('/')
      await request(app).get('/')
      const timers = vi.getTimerCount()
      const third = request(app)
        .get('/')
        .then((response) => response)
      await vi.waitUntil(() => vi.getTimerCount() > timers)
      await vi.advanceTimersByTimeAsync(500)
      const response = await third
      expect(response.status).toBe(200)
      expect(response.body).toEqual({ delay: 500 })
    } finally {
      slower.close()
    }
  })
})
