/**
 * Issue 47, item 1: plans on every framework. One middleware with `plans` and a `plan` function read from the
 * account the server authenticated: each request is decided with its plan's limits, the headers describe them, a
 * plan change keeps the window's usage, and an unknown plan is the application's error (or `defaultPlan`'s).
 */
import { fixedWindow, MemoryStore } from '@ratewindow/core'
import { describe, expect, it } from 'vitest'
import { type AppSpec, appPerTest, FRAMEWORKS, headerOf } from './harness.js'

/** What the server knows of each token: the account and its plan (never what the client claims). */
const accounts = new Map<string, { id: string; plan: string }>()
const accountOf = (request: unknown) => accounts.get(headerOf(request, 'authorization') ?? '')

const spec = (more: AppSpec['global'] = {}): AppSpec => ({
  global: {
    store: new MemoryStore({ maxKeys: 1_000 }),
    plans: {
      free: fixedWindow({ limit: 2, window: '1m', name: 'per-minute' }),
      pro: fixedWindow({ limit: 4, window: '1m', name: 'per-minute' }),
    },
    key: (request: unknown) => accountOf(request)?.id ?? 'anonymous',
    plan: (request: unknown) => accountOf(request)?.plan ?? 'free',
    ...more,
  },
})

const as = (token: string) => ({ headers: { authorization: token } })

describe.each(FRAMEWORKS)('$name: plans', (framework) => {
  const { start } = appPerTest((given: AppSpec) => framework.start(given))

  it("decides with each account's plan, and an upgrade keeps the window's usage", async () => {
    accounts.set(`${framework.name}-a`, { id: 'acme', plan: 'free' })
    const url = await start(spec())
    const token = `${framework.name}-a`
    const first = await fetch(url, as(token))
    expect(await first.text()).toBe('ok')
    expect(first.headers.get('ratelimit-policy')).toMatch(/^2;w=60/)
    expect((await fetch(url, as(token))).status).toBe(200)
    expect((await fetch(url, as(token))).status).toBe(429)
    // The account upgrades: 2 of pro's 4 are used already.
    accounts.set(token, { id: 'acme', plan: 'pro' })
    const upgraded = await fetch(url, as(token))
    expect(upgraded.status).toBe(200)
    expect(upgraded.headers.get('ratelimit-policy')).toMatch(/^4;w=60/)
    expect(upgraded.headers.get('ratelimit-remaining')).toBe('1')
    expect((await fetch(url, as(token))).status).toBe(200)
    expect((await fetch(url, as(token))).status).toBe(429)
  })

  it('refuses an unknown plan as an application error, or answers with defaultPlan', async () => {
    accounts.set(`${framework.name}-b`, { id: 'beta', plan: 'gold' })
    const strict = await start(spec())
    const refused = await fetch(strict, as(`${framework.name}-b`))
    expect(refused.status).toBe(500)
    const lenient = await start(spec({ defaultPlan: 'free' }))
    const answered = await fetch(lenient, as(`${framework.name}-b`))
    expect(answered.status).toBe(200)
    expect(answered.headers.get('ratelimit-policy')).toMatch(/^2;w=60/)
  })
})
