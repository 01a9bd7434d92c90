/**
 * What the attack round on the admin endpoint found (issue 45, item 25), each as the attacker sent it: raw HTTP
 * requests to a real server (Express, the endpoint mounted as docs/operations.md shows).
 */
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fixedWindow, MemoryStore, type OverrideEvent, RateLimiter } from '@ratewindow/core'
import express from 'express'
import { afterEach, describe, expect, it } from 'vitest'
import { expressAdmin } from '../src/express.js'
import { type AdminHandler, adminHandler } from '../src/index.js'

const servers: Server[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))))
})

/** An Express app with the endpoint mounted before anything else: its base URL. */
async function serve(admin: AdminHandler): Promise<string> {
  const app = express()
  app.use(expressAdmin(admin))
  const server = app.listen(0, '127.0.0.1')
  servers.push(server)
  await new Promise((resolve) => server.once('listening', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

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
    const url = await serve(admin)
    const block = (token?: string) =>
      fetch(`${url}/_ratewindow/limiters/api/keys/victim/block`, {
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
