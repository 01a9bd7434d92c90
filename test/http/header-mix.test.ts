/**
 * Two limiters on one route whose RateLimit fields differ in shape (http/header-mix.ts): the response states two
 * quotas that contradict each other, and the process is told so once (issue 32). Its own file: the warning is
 * once per process, and each test file has its own modules.
 */
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as honoRateLimit } from '@ratewindow/hono'
import express from 'express'
import { Hono } from 'hono'
import request from 'supertest'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

let warnings: (Error & { code?: string })[] = []
const listener = (warning: Error) => warnings.push(warning)
beforeEach(() => {
  warnings = []
  process.on('warning', listener)
})
afterEach(() => {
  process.off('warning', listener)
})

const mixed = () => warnings.filter((warning) => warning.code === 'RATEWINDOW_MIXED_HEADERS')

/** Lets the warnings of the last request (emitted on the next tick) arrive. */
const settled = () => new Promise((resolve) => setImmediate(resolve))

describe('limiters of different header formats on one route', () => {
  it('two of one shape (draft-7 and draft-8 write the same fields) say nothing; the later fields replace the earlier', async () => {
    const app = express()
    app.use(expressRateLimit({ limit: 5, headers: 'draft-7' }))
    app.get('/', expressRateLimit({ limit: 3, headers: 'draft-8' }), (_req, res) => {
      res.send('ok')
    })
    const response = await request(app).get('/').expect(200)
    await settled()
    expect(response.headers.ratelimit).toMatch(/r=2/)
    expect(mixed()).toEqual([])
  })

  // Issue 32: a global draft-6 limiter and a route's draft-8 one sent `RateLimit-Limit: 5` beside
  // `RateLimit: "3-per-1m";r=2`, silently. Hono, where each limiter still writes its own fields.
  it('draft-6 beside draft-8: the contradicting quotas are named in one warning, with the fix (regression)', async () => {
    const app = new Hono()
    app.use(honoRateLimit({ limit: 5, name: 'api', key: () => 'client' }))
    app.get('/', honoRateLimit({ limit: 3, headers: 'draft-8', name: 'search', key: () => 'client' }), (c) =>
      c.text('ok'),
    )
    const first = await app.request('/')
    expect(first.status).toBe(200)
    // What the warning is about: two quotas on one response.
    expect(first.headers.get('ratelimit-limit')).toBe('5')
    expect(first.headers.get('ratelimit')).toMatch(/r=2/)
    expect((await app.request('/')).status).toBe(200)
    await settled()
    expect(mixed()).toHaveLength(1)
    expect(mixed()[0]!.message).toMatch(
      /'api' \(headers: 'draft-6'\) and 'search' \(headers: 'draft-8'\).*contradict.*same `headers`/,
    )
  })

  // Session 6: Express (as Koa and Fastify) shows one limiter's fields, the fewest requests left: nothing mixes.
  it('Express: draft-6 beside draft-8, the fields of the limiter with the fewest left alone, and no warning', async () => {
    const app = express()
    app.use(expressRateLimit({ limit: 5, name: 'api' }))
    app.get('/', expressRateLimit({ limit: 3, headers: 'draft-8', name: 'search' }), (_req, res) => {
      res.send('ok')
    })
    const first = await request(app).get('/').expect(200)
    expect(first.headers['ratelimit-limit']).toBeUndefined()
    expect(first.headers.ratelimit).toMatch(/r=2/)
    await settled()
    expect(mixed()).toEqual([])
  })
})
