/**
 * Attacks on `@ratewindow/sveltekit`, each as the attacker sent it. Those that need a real SvelteKit server run in
 * test/runtimes/sveltekit.test.ts, on the app it builds once and serves with adapter-node (served-attacks.ts
 * registers them there); the rest run here, on the hook as SvelteKit calls it.
 */
import { readFileSync } from 'node:fs'
import { rateLimit, rateLimitAction } from '@ratewindow/sveltekit'
import type { RequestEvent } from '@sveltejs/kit'
import { describe, expect, it } from 'vitest'
import { SERVED_ATTACKS } from './served-attacks.js'

/** The parts of a `RequestEvent` the hook reads, as adapter-node makes them. */
function eventOf(request: Request, getClientAddress: () => string): RequestEvent {
  return {
    request,
    url: new URL(request.url),
    route: { id: '/api' },
    locals: {},
    platform: undefined,
    getClientAddress,
  } as unknown as RequestEvent
}

describe('the client address', () => {
  it("a request without the header adapter-node's ADDRESS_HEADER names (it came round the proxy) is answered 500 and counted nowhere", async () => {
    const handle = rateLimit({ limit: 1, window: '1m' })
    let resolved = 0
    const resolve = async () => {
      resolved++
      return new Response('ok')
    }
    const roundTheProxy = () => {
      throw new Error(
        'Address header was specified with ADDRESS_HEADER=x-forwarded-for but is absent from request',
      )
    }
    for (let i = 0; i < 3; i++) {
      const response = await handle({ event: eventOf(new Request('http://app/api'), roundTheProxy), resolve })
      expect([response.status, await response.text()]).toEqual([500, 'Internal Server Error'])
    }
    expect(resolved).toBe(0)
    // The address the proxy wrote is decided as ever: nothing was counted for the three above.
    const through = await handle({
      event: eventOf(new Request('http://app/api'), () => '203.0.113.7'),
      resolve,
    })
    expect([through.status, resolved]).toEqual([200, 1])
    handle.close()
  })

  it('trustProxy beside clientIp, or a /0-free list that is not addresses, throws at construction naming the option', () => {
    expect(() => rateLimit({ trustProxy: 1, clientIp: () => '203.0.113.7' })).toThrow(
      /`trustProxy` or `clientIp`/,
    )
    expect(() => rateLimit({ trustProxy: ['not a network'] })).toThrow(/`trustProxy`/)
  })

  it('a form action limiter refuses the options that need a response, naming each', () => {
    expect(() => rateLimitAction({ skipFailedRequests: true } as never)).toThrow(
      /`skipFailedRequests` needs a response/,
    )
    expect(() => rateLimitAction({ concurrency: 1 } as never)).toThrow(/`concurrency` needs a response/)
  })
})

describe('under adapter-node (test/runtimes/sveltekit.test.ts, memory and Redis)', () => {
  it.each(SERVED_ATTACKS)('%s', (name) => {
    const runtime = readFileSync(new URL('../../../test/runtimes/sveltekit.test.ts', import.meta.url), 'utf8')
    expect(runtime).toContain('describeKitAttacks(')
    expect(name.length).toBeGreaterThan(0)
  })
})
