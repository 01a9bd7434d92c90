/**
 * Parallel test files on one Redis (issue 21, item 3): two workers, each with its own client and store, as two
 * test files running at once, test the same app from the same address (127.0.0.1).
 */
import { RedisStore } from '@ratewindow/core'
import { rateLimit } from '@ratewindow/express'
import { testPrefix, workerId } from '@ratewindow/testing'
import express from 'express'
import { Redis } from 'ioredis'
import request from 'supertest'
import { afterAll, describe, expect, it } from 'vitest'
import { redisEnvironment } from '../support/redis.js'

const clients: Redis[] = []
afterAll(async () => {
  await Promise.all(clients.map((client) => client.quit()))
})

/** One test file's app, in a worker of its own: its own client and store, `limit: 3`. */
function worker(prefix: string) {
  const client = new Redis({ port: redisEnvironment().standalonePort })
  clients.push(client)
  const app = express()
  app.use(rateLimit({ limit: 3, window: '1m', store: new RedisStore({ client, prefix }) }))
  app.get('/', (_request, response) => {
    response.send('ok')
  })
  // What each file's test asserts: three requests pass, the fourth is limited.
  return async () => {
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) statuses.push((await request(app).get('/')).status)
    return statuses
  }
}

describe('two test files at once on one Redis', () => {
  it("with one prefix for both (what a suite writes without thinking), they use up each other's quota", async () => {
    const shared = `shared-${process.pid}-${Date.now()}:`
    const [a, b] = [worker(shared), worker(shared)]
    const results = await Promise.all([a(), b()])
    // 8 requests against one budget of 3: the files fail, in a different way on each run.
    expect(results.flat().filter((status) => status === 200)).toHaveLength(3)
  })

  it('with testPrefix(), each has counters of its own and both pass', async () => {
    const [a, b] = [worker(testPrefix('api')), worker(testPrefix('api'))]
    expect(await Promise.all([a(), b()])).toEqual([
      [200, 200, 200, 429],
      [200, 200, 200, 429],
    ])
  })

  it('testPrefix names the worker (vitest pool id, jest worker id), and differs per call', () => {
    expect(workerId()).toBe(process.env.VITEST_POOL_ID)
    expect(testPrefix('api')).toMatch(new RegExp(`^api:w${workerId()}:[a-z0-9]+\\.\\d+:$`))
  })
})
