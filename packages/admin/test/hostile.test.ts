/**
 * What the attack round on the admin endpoint found (issue 45, item 25), each as the attacker sent it: raw HTTP
 * requests to a real server (Express, the endpoint mounted as docs/operations.md shows).
 */
import { fixedWindow, MemoryStore, type OverrideEvent, RateLimiter } from '@ratewindow/core'
import { afterEach, describe, expect, it } from 'vitest'
import { adminHandler } from '../src/index.js'
import { MOUNTS, type RunningApp } from './apps.js'

const running: RunningApp[] = []
afterEach(async () => {
  await Promise.all(running.splice(0).map((app) => app.close()))
})

/** Service tokens and their owners, as an application keeps them; one was issued with a blank owner. */
const TOKENS: Record<string, string> = { 'ops-7f3a': 'alice', 'svc-91c2': '  ', 'svc-44d0': '\t\u3000' }

describe('authorize', () => {
  it("returned a blank name ('  ') and the endpoint let the request in, acting as an actor named '  '", async () => {
    const events: OverrideEvent[] = []
    const api = new RateLimiter({
      rules: fixedWindow({ limit: 3, window: '1h' }),
      store: new MemoryStore(),
      name: 'api',
      overrides: true,
      observer: { onOverride: (event) => void events.push(event) },
    })
    const admin = adminHandler({
      limiters: [api],
      // The owner of a bearer token, looked up: a token issued with a blank owner answers a blank name.
      authorize: (request) =>
        TOKENS[request.headers.get('authorization')?.replace(/^Bearer /, '') ?? ''] ?? false,
      basePath: '/_ratewindow',
    })
    const app = await MOUNTS.Express!(api, admin)
    running.push(app)
    const block = (token?: string) =>
      fetch(`${app.url}/_ratewindow/limiters/api/keys/victim/block`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token && { authorization: `Bearer ${token}` }) },
        body: JSON.stringify({ for: '1h' }),
      })
    for (const token of ['svc-91c2', 'svc-44d0']) {
      const refused = await block(token)
      expect(refused.status).toBe(403)
      expect(await refused.json()).toEqual({
        error: { code: 'ERR_RATEWINDOW_FORBIDDEN', message: 'Not authorized.' },
      })
    }
    expect((await block()).status).toBe(401)
    expect(events).toEqual([])
    expect((await api.limit('victim')).allowed).toBe(true)
    // A name lets in, and is the actor.
    expect((await block('ops-7f3a')).status).toBe(200)
    expect(events.map((event) => event.actor)).toEqual(['alice'])
  })
})
