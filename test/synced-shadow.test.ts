/**
 * Shadow rules beside enforcing rules on a SyncedStore, against the suite's real redis-server (standalone and
 * Cluster): headers describe the enforcing rules only, a shadow rule over its limit reports `shadow-limited`
 * while the request passes, and each rule set's counts reach Redis.
 */
import { type DecisionEvent, fixedWindow, type RedisClient, SyncedStore } from '@ratewindow/core'
import { type FrameworkBinding, HttpRateLimiter } from '@ratewindow/core/adapter'
import type { Cluster, Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { ManualClock } from './support/clock.js'
import { clusterClient, standaloneClient } from './support/redis.js'

/** Requests are plain objects naming their client. */
interface FakeRequest {
  user: string
}

const binding: FrameworkBinding<FakeRequest> = {
  name: 'test',
  clientIp: () => '203.0.113.1',
  untrustedForwardedFor: () => undefined,
  trustProxyHint: '',
}

const stores: SyncedStore[] = []
afterAll(async () => {
  await Promise.all(stores.splice(0).map((store) => store.close()))
})

let unique = 0

describe.each([
  ['standalone', () => standaloneClient()],
  ['Cluster', () => clusterClient()],
] as const)('SyncedStore (%s): shadow rules beside enforcing rules', (_, connect) => {
  it('headers describe the enforcing rule only; the shadow rule over its limit reports shadow-limited and the request passes', async () => {
    const client: Redis | Cluster = connect()
    const clock = new ManualClock(1_699_999_200_000) // the start of an hour
    const store = new SyncedStore({ client: client as RedisClient, clock: clock.read, interval: '1h' })
    stores.push(store)
    const burst = fixedWindow({ limit: 1, window: '1m', name: 'burst', shadow: true })
    const hourly = fixedWindow({ limit: 3, window: '1h', name: 'hourly' })
    const events: DecisionEvent[] = []
    const engine = new HttpRateLimiter<FakeRequest>(
      {
        rules: [burst, hourly],
        store,
        prefix: `syncshadow${process.pid}x${unique++}`,
        key: (request) => request.user,
        headers: 'draft-11',
        observer: { onDecision: (event) => void events.push(event) },
      },
      binding,
    )
    const decisions = []
    for (let i = 0; i < 4; i++) decisions.push((await engine.decide({ user: 'ann' }))!)
    expect(decisions.map((decision) => decision.result.allowed)).toEqual([true, true, true, false])
    expect(decisions.map((decision) => decision.result.shadow)).toEqual([undefined, true, true, undefined])
    expect(events.map((event) => `${event.outcome}:${event.rule}`)).toEqual([
      'allowed:hourly',
      'shadow-limited:burst',
      'shadow-limited:burst',
      'limited:hourly',
    ])
    expect(decisions.map((decision) => decision.headers['RateLimit'])).toEqual([
      '"hourly";r=2;t=3600',
      '"hourly";r=1;t=3600',
      '"hourly";r=0;t=3600',
      '"hourly";r=0;t=3600',
    ])
    for (const decision of decisions) {
      expect(decision.headers['RateLimit-Policy']).toBe('"hourly";q=3;w=3600')
    }
    expect(decisions.slice(0, 3).map((decision) => decision.headers['Retry-After'])).toEqual([
      undefined,
      undefined,
      undefined,
    ])
    expect(decisions[3]!.headers['Retry-After']).toBe('3600')
    // The shadow-limited results keep the shadow rule's refusal, in rule order.
    expect(decisions[1]!.result.rules.map((rule) => [rule.rule.name, rule.allowed])).toEqual([
      ['burst', false],
      ['hourly', true],
    ])
    // Each rule set's counts reach Redis on sync: the shadow rule counted only the request it admitted.
    await store.sync()
    const count = async (rule: typeof burst) => {
      const value = await client.get(store.keyFor(engine.namespace, 'ann', rule))
      return Number(value?.split(':')[1] ?? 0)
    }
    expect(await count(hourly)).toBe(3)
    expect(await count(burst)).toBe(1)
    // A minute later the shadow rule admits again; the hourly rule still refuses.
    clock.advance(60_000)
    const later = (await engine.decide({ user: 'ann' }))!
    expect(later.result.allowed).toBe(false)
    expect(later.headers['RateLimit']).toBe('"hourly";r=0;t=3540')
    engine.release()
  })
})
