/**
 * A body parser that ran before the mount (docs/operations.md allows it: "a body the parser already read is taken as
 * it is"): its body reaches the handler, which still answers its own limit and `authorize` first. An outside attack
 * found a 5,000-deep JSON body, which Express's parser accepts, answered 500 before `authorize` (the mount wrote
 * it back as JSON and overflowed the stack), and every Hono action answered 500 after a middleware read the body.
 */
import type { Server } from 'node:http'
import { serve } from '@hono/node-server'
import { fixedWindow, MemoryStore, RateLimiter } from '@ratewindow/core'
import express from 'express'
import { Hono } from 'hono'
import { afterEach, describe, expect, it } from 'vitest'
import { expressAdmin } from '../src/express.js'
import { honoAdmin } from '../src/hono.js'
import { adminHandler } from '../src/index.js'
import { listening, type RunningApp } from './apps.js'

const apps: RunningApp[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

function handler() {
  const api = new RateLimiter({
    rules: fixedWindow({ limit: 2, window: '1m' }),
    store: new MemoryStore(),
    name: 'api',
    overrides: true,
  })
  const admin = adminHandler({
    limiters: [api],
    authorize: (request) => request.headers.get('authorization') === 'Bearer t0ken' && 'ops',
    basePath: '/_ratewindow',
  })
  return { api, admin }
}

const post = (url: string, body: string, token?: string) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token && { authorization: `Bearer ${token}` }) },
    body,
  })

describe('a body parser before the mount', () => {
  it('Express: a JSON body nested 5,000 deep gets 401 without the token and 400 with it, never a 500', async () => {
    const { api, admin } = handler()
    const app = express()
    app.use(express.json())
    app.use(expressAdmin(admin))
    const running = await listening(app.listen(0, '127.0.0.1'))
    apps.push(running)
    const deep = `{"for":${'['.repeat(5_000)}${']'.repeat(5_000)}}`
    const block = `${running.url}/_ratewindow/limiters/api/keys/k/block`
    expect((await post(block, deep)).status).toBe(401)
    const withToken = await post(block, deep, 't0ken')
    expect([withToken.status, ((await withToken.json()) as { error: { code: string } }).error.code]).toEqual([
      400,
      'ERR_RATEWINDOW_INVALID_JSON',
    ])
    // An ordinary action still works through the parsed body.
    expect((await post(block, JSON.stringify({ for: '1h' }), 't0ken')).status).toBe(200)
    expect((await api.limit('k')).allowed).toBe(false)
  })

  it('Hono: an action works after a middleware read the body (`c.req.json()`)', async () => {
    const { api, admin } = handler()
    const app = new Hono()
    app.use(async (c, next) => {
      if (c.req.method === 'POST') await c.req.json()
      await next()
    })
    app.use(honoAdmin(admin))
    const running = await listening(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server)
    apps.push(running)
    const answer = await post(
      `${running.url}/_ratewindow/limiters/api/keys/k/block`,
      JSON.stringify({ for: '1h' }),
      't0ken',
    )
    expect(answer.status).toBe(200)
    expect((await api.limit('k')).allowed).toBe(false)
  })
})
