/**
 * Issue 35, item 2: the admin endpoint through each mount (Express, Koa, Fastify, Hono on Node, NestJS on both
 * platforms) on real servers, on the memory store and (Express, Fastify) on a real Redis: inspect, block, override
 * and reset through HTTP, each honoured at the app's next decision; refused without authorization; GET never acts;
 * `/stats` after a scripted sequence; the endpoint's own limit.
 */
import {
  fixedWindow,
  MemoryStore,
  type OverrideEvent,
  RateLimiter,
  RedisStore,
  type Store,
} from '@ratewindow/core'
import { afterEach, describe, expect, it } from 'vitest'
import { standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { adminHandler, adminStats } from '../src/index.js'
import { MOUNTS, type RunningApp } from './apps.js'

const TOKEN = 'test-token'
const BASE = '/_ratewindow'
const cleanups: (() => Promise<void> | void)[] = []

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

/** Bearer-token `authorize`: the actor is the token's owner. */
function authorize(request: Request): string | false {
  return request.headers.get('authorization') === `Bearer ${TOKEN}` && 'ops'
}

interface Setup {
  app: RunningApp
  events: OverrideEvent[]
  /** GET (or POST with a JSON body) on the admin endpoint, authorized unless `token: null`. */
  admin(path: string, init?: { body?: unknown; token?: string | null; type?: string }): Promise<Answer>
  /** The app's decision for `key`: 200 or 429. */
  call(key: string): Promise<number>
}

interface Answer {
  status: number
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON of every shape the contract has, read field by field
  body: any
  headers: Headers
}

async function start(mount: string, store: Store, options: { limit?: number } = {}): Promise<Setup> {
  const events: OverrideEvent[] = []
  const stats = adminStats({ capacity: 8 })
  const api = new RateLimiter({
    rules: fixedWindow({ limit: 3, window: '1h', name: 'per-hour' }),
    store,
    name: 'api',
    prefix: store instanceof RedisStore ? uniquePrefix() : 'rw',
    overrides: true,
    observer: { onDecision: stats.onDecision, onOverride: (event) => void events.push(event) },
  })
  cleanups.push(() => api.release())
  const handler = adminHandler({ limiters: [api], authorize, stats, basePath: BASE, ...options })
  const app = await MOUNTS[mount]!(api, handler)
  cleanups.push(() => app.close())
  return {
    app,
    events,
    async admin(path, { body, token = TOKEN, type = 'application/json' } = {}) {
      const headers: Record<string, string> = {}
      if (token !== null) headers.authorization = `Bearer ${token}`
      if (body !== undefined) headers['content-type'] = type
      const response = await fetch(`${app.url}${BASE}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers,
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      })
      const text = await response.text()
      expect(response.headers.get('content-type')).toMatch(/^application\/json/)
      return { status: response.status, body: JSON.parse(text), headers: response.headers }
    },
    async call(key) {
      const response = await fetch(`${app.url}/api`, { headers: { 'x-key': key } })
      await response.arrayBuffer()
      return response.status
    },
  }
}

/**
 * Where a framework answers before the mount runs, with its own 400 JSON: Fastify refuses a path of bad URL encoding
 * before routing; Nest's JSON body parser (on by default) refuses bad JSON, and its middleware routing a path of bad
 * URL encoding, before any middleware runs.
 */
const FRAMEWORK_ANSWERS: Record<string, string[]> = {
  Fastify: ['bad URL encoding'],
  NestJS: ['bad JSON', 'bad URL encoding'],
  'NestJS on Fastify': ['bad URL encoding'],
}

/**
 * The stores' clock: inside an hour, so that the test's hourly window never ends between two of its calls (a run
 * across a full hour once counted afresh: 200 where 429 was due).
 */
const clock = (): number => Date.parse('2026-03-10T12:30:00Z')
const stores: Record<string, () => Store> = {
  MemoryStore: () => new MemoryStore({ clock }),
  RedisStore: () => new RedisStore({ client: standaloneClient(), clock }),
}

const matrix: [string, string][] = [
  ...Object.keys(MOUNTS).map((mount): [string, string] => [mount, 'MemoryStore']),
  ['Express', 'RedisStore'],
  ['Fastify', 'RedisStore'],
]

describe.each(matrix)('%s with %s', (mount, storeName) => {
  it('inspect, block, override and reset through HTTP, each honoured at the next decision', async () => {
    const { admin, call, events } = await start(mount, stores[storeName]!())
    const key = 'customer/42 é' // a slash and a non-ASCII letter: URL-encoded in the path
    const path = `/limiters/api/keys/${encodeURIComponent(key)}`

    expect((await admin('/limiters')).body).toEqual({
      limiters: [
        {
          name: 'api',
          rules: [{ name: 'per-hour', algorithm: 'fixed-window', limit: 3, window: 3_600_000 }],
          overrides: true,
        },
      ],
    })
    expect(await call(key)).toBe(200)
    const inspected = await admin(path)
    expect(inspected.status).toBe(200)
    expect(inspected.body).toMatchObject({
      key,
      rules: [{ name: 'per-hour', limit: 3, used: 1, remaining: 2 }],
    })

    const blocked = await admin(`${path}/block`, { body: { for: '1h', reason: 'ticket 1' } })
    expect(blocked.status).toBe(200)
    expect(blocked.body).toMatchObject({ key, block: { reason: 'ticket 1' } })
    expect(await call(key)).toBe(429)
    expect((await admin(`${path}/unblock`, { body: {} })).body).toEqual({ ok: true })
    expect(await call(key)).toBe(200)

    const set = await admin(`/limiters/api/overrides/${encodeURIComponent(key)}`, {
      body: { override: { limit: 10 }, ttl: '1d' },
    })
    expect(set.status).toBe(200)
    expect(set.body).toMatchObject({ key, limits: { limit: 10 } })
    for (let i = 0; i < 8; i++) expect(await call(key)).toBe(200) // 2 used + 8 = 10
    expect(await call(key)).toBe(429)
    expect((await admin(`/limiters/api/overrides/${encodeURIComponent(key)}`)).body).toMatchObject({
      limits: { limit: 10 },
    })
    // Page after page (a page may be empty before the end on a keyspace shared with other tests); the first call
    // with an empty `cursor` parameter, which counts as none.
    const listed: string[] = []
    let cursor = ''
    do {
      // The largest page (`count` is a SCAN hint): few calls, well under the endpoint's own limit.
      const page = await admin(`/limiters/api/overrides?cursor=${encodeURIComponent(cursor)}&count=1000`)
      expect(page.status).toBe(200)
      listed.push(...page.body.records.map((record: { key: string }) => record.key))
      cursor = page.body.cursor ?? ''
    } while (cursor !== '')
    expect(listed).toContain(key)

    expect(
      (await admin(`/limiters/api/overrides/${encodeURIComponent(key)}/delete`, { body: {} })).status,
    ).toBe(200)
    const gone = await admin(`/limiters/api/overrides/${encodeURIComponent(key)}`)
    expect([gone.status, gone.body.error.code]).toEqual([404, 'ERR_RATEWINDOW_NOT_FOUND'])
    expect(await call(key)).toBe(429) // 10 used of 3 again

    expect((await admin(`${path}/reset`, { body: {} })).body).toEqual({ ok: true })
    expect(await call(key)).toBe(200)
    expect((await admin(path)).body.rules[0]).toMatchObject({ used: 1 })

    // Every change carries the actor `authorize` returned.
    expect(events.map(({ action, actor }) => [action, actor])).toEqual([
      ['block', 'ops'],
      ['unblock', 'ops'],
      ['set', 'ops'],
      ['delete', 'ops'],
    ])
  })

  it('refuses without authorization (401, 403), and GET never acts', async () => {
    const { admin, call, events } = await start(mount, stores[storeName]!())
    const none = await admin('/limiters', { token: null })
    expect([none.status, none.body.error.code]).toEqual([401, 'ERR_RATEWINDOW_UNAUTHORIZED'])
    expect(none.headers.get('www-authenticate')).toBe('Bearer')
    const wrong = await admin('/limiters/api/keys/k/block', { body: { for: '1h' }, token: 'guess' })
    expect([wrong.status, wrong.body.error.code]).toEqual([403, 'ERR_RATEWINDOW_FORBIDDEN'])

    for (let i = 0; i < 3; i++) await call('k')
    for (const action of ['reset', 'block', 'unblock']) {
      const got = await admin(`/limiters/api/keys/k/${action}`)
      expect([got.status, got.body.error.code, got.headers.get('allow')]).toEqual([
        405,
        'ERR_RATEWINDOW_METHOD_NOT_ALLOWED',
        'POST',
      ])
    }
    expect((await admin('/limiters/api/overrides/k/delete')).status).toBe(405)
    expect(await call('k')).toBe(429) // not reset
    expect((await admin('/limiters/api/keys/k')).body.block).toBeUndefined()
    expect(events).toEqual([])
  })

  it('answers hostile input with 4xx JSON naming the problem', async () => {
    const { admin, call } = await start(mount, stores[storeName]!())
    const cases: [string, string, Parameters<Setup['admin']>[1], number, string, RegExp][] = [
      [
        'bad JSON',
        '/limiters/api/keys/k/block',
        { body: '{"for":' },
        400,
        'ERR_RATEWINDOW_INVALID_JSON',
        /not JSON/,
      ],
      [
        'no object',
        '/limiters/api/keys/k/block',
        { body: '[1]' },
        400,
        'ERR_RATEWINDOW_INVALID_JSON',
        /object/,
      ],
      [
        'a form',
        '/limiters/api/keys/k/block',
        { body: 'for=1h', type: 'application/x-www-form-urlencoded' },
        415,
        'ERR_RATEWINDOW_UNSUPPORTED_MEDIA_TYPE',
        /application\/json/,
      ],
      [
        'a typo',
        '/limiters/api/keys/k/block',
        { body: { for: '1h', forever: true } },
        400,
        'ERR_RATEWINDOW_UNKNOWN_OPTION',
        /forever/,
      ],
      [
        'a bad duration',
        '/limiters/api/keys/k/block',
        { body: { for: 'soon' } },
        400,
        'ERR_RATEWINDOW_INVALID_WINDOW',
        /for/,
      ],
      [
        'an actor in the body',
        '/limiters/api/keys/k/block',
        { body: { for: '1h', actor: 'me' } },
        400,
        'ERR_RATEWINDOW_UNKNOWN_OPTION',
        /actor/,
      ],
      ['an unknown limiter', '/limiters/nope/keys/k', undefined, 404, 'ERR_RATEWINDOW_NOT_FOUND', /nope/],
      [
        'an overlong key',
        `/limiters/api/keys/${'k'.repeat(2000)}`,
        undefined,
        400,
        'ERR_RATEWINDOW_INVALID_REQUEST',
        /1 to 1024/,
      ],
      [
        'a key too long to block',
        `/limiters/api/keys/${'k'.repeat(200)}/block`,
        { body: { for: '1h' } },
        400,
        'ERR_RATEWINDOW_INVALID_KEY',
        /128/,
      ],
      [
        'bad URL encoding',
        '/limiters/api/keys/%E0%A4%A/reset',
        { body: {} },
        400,
        'ERR_RATEWINDOW_INVALID_REQUEST',
        /encoding/,
      ],
      [
        'a bad override',
        '/limiters/api/overrides/k',
        { body: { override: { limit: -1 } } },
        400,
        'ERR_RATEWINDOW_INVALID_LIMIT',
        /limit/,
      ],
      [
        'no override',
        '/limiters/api/overrides/k',
        { body: { ttl: '1d' } },
        400,
        'ERR_RATEWINDOW_INVALID_REQUEST',
        /override/,
      ],
      [
        'a bad count',
        '/limiters/api/overrides?count=lots',
        undefined,
        400,
        'ERR_RATEWINDOW_INVALID_REQUEST',
        /count/,
      ],
      [
        'a count too large',
        '/limiters/api/overrides?count=1001',
        undefined,
        400,
        'ERR_RATEWINDOW_INVALID_REQUEST',
        /1 to 1000/,
      ],
      [
        'a query typo',
        '/limiters/api/overrides?cursr=0',
        undefined,
        400,
        'ERR_RATEWINDOW_UNKNOWN_OPTION',
        /cursr/,
      ],
      [
        'a large body',
        '/limiters/api/keys/k/block',
        { body: { for: '1h', reason: 'x'.repeat(40_000) } },
        413,
        'ERR_RATEWINDOW_BODY_TOO_LARGE',
        /16384/,
      ],
      ['no route', '/nothing', undefined, 404, 'ERR_RATEWINDOW_NOT_FOUND', /route/],
    ]
    for (const [label, path, init, status, code, message] of cases) {
      const answer = await admin(path, init)
      if (FRAMEWORK_ANSWERS[mount]?.includes(label)) {
        // The framework answered before the mount (its own 400 JSON): see docs/operations.md.
        expect([label, answer.status]).toEqual([label, status])
        continue
      }
      expect([label, answer.status, answer.body.error?.code]).toEqual([label, status, code])
      expect(answer.body.error.message).toMatch(message)
      expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8')
    }
    // A forged cursor: every store refuses it by name.
    const forged = await admin('/limiters/api/overrides?cursor=%7B%22x')
    expect([forged.status, forged.body.error.code]).toEqual([400, 'ERR_RATEWINDOW_INVALID_OPTION'])
    expect(await call('k')).toBe(200) // nothing was blocked
  })

  it('GET /stats: the decisions and the most refused keys after a scripted sequence', async () => {
    const { admin, call } = await start(mount, stores[storeName]!())
    // a: 5 calls (3 allowed, 2 refused); b: 4 (3, 1); c: 2 allowed.
    for (const [key, times] of [
      ['a', 5],
      ['b', 4],
      ['c', 2],
    ] as const)
      for (let i = 0; i < times; i++) await call(key)
    const stats = await admin('/stats')
    expect(stats.status).toBe(200)
    expect(stats.body).toEqual({
      since: expect.any(Number),
      decisions: { api: { allowed: 8, refused: 3 } },
      refused: [
        { limiter: 'api', key: 'a', count: 2 },
        { limiter: 'api', key: 'b', count: 1 },
      ],
    })
    expect((await admin('/stats?count=1')).body.refused).toEqual([{ limiter: 'api', key: 'a', count: 2 }])
  })

  it('limits itself: past `limit` requests a window, 429 JSON with Retry-After, before `authorize`', async () => {
    const { admin } = await start(mount, stores[storeName]!(), { limit: 3 })
    expect((await admin('/limiters')).status).toBe(200)
    expect((await admin('/limiters', { token: null })).status).toBe(401)
    expect((await admin('/stats')).status).toBe(200)
    const limited = await admin('/limiters')
    expect([limited.status, limited.body.error.code]).toEqual([429, 'ERR_RATEWINDOW_RATE_LIMITED'])
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0)
    expect((await admin('/limiters', { token: null })).status).toBe(429)
  })
})
