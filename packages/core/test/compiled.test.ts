import { type HttpRateLimitOptions, MemoryStore, slidingWindowCounter } from '@ratewindow/core'
import { type FrameworkBinding, HttpRateLimiter } from '@ratewindow/core/adapter'
import { describe, expect, it } from 'vitest'
import { compiledPath, useGeneralPipeline } from '../src/http/compiled.js'
import { resolveHttpOptions } from '../src/http/config.js'
import { DecisionWriter, type HttpDecision } from '../src/http/decision.js'
import { AccessGate } from '../src/http/gate.js'
import { RateLimiter } from '../src/limiter/limiter.js'

interface Req {
  ip: string
}

const binding: FrameworkBinding<Req> = {
  name: 'Test',
  clientIp: (request) => request.ip,
  untrustedForwardedFor: () => false,
  trustProxyHint: '',
  route: () => '/',
}

/** Whether a middleware of `options` takes the compiled path. */
function compiles(options: HttpRateLimitOptions<Req>): boolean {
  const config = resolveHttpOptions<Req>({ store: new MemoryStore(), ...options })
  const writer = new DecisionWriter(config, binding)
  const limiter = fixedLimiter(config)
  const gate = new AccessGate(config, binding, writer, () => limiter)
  return compiledPath(config, binding, limiter, gate, writer) !== undefined
}

/** The limiter of every request, as `LimiterSet.fixed`: none for a `limit` or `rules` function. */
function fixedLimiter(config: ReturnType<typeof resolveHttpOptions<Req>>): RateLimiter | undefined {
  if (config.resolveRules !== undefined || typeof config.limit === 'function') return undefined
  return new RateLimiter({ ...config.limiter, rules: slidingWindowCounter({ limit: 5, window: '1m' }) })
}

describe('the compiled pipeline', () => {
  it('is taken by the common configuration, with or without headers, a key function, a store or a number cost', () => {
    expect(compiles({})).toBe(true)
    expect(compiles({ limit: 10, window: '1m', headers: false })).toBe(true)
    expect(compiles({ key: (request) => request.ip, cost: 2, limit: 5, skipFailedRequests: true })).toBe(true)
    expect(compiles({ observer: { onDecision: () => {} } })).toBe(false) // the route is wanted: general
  })

  it('is not taken for a step only the general pipeline has', () => {
    for (const options of [
      { skip: () => false },
      { allowList: ['192.0.2.1'] },
      { denyList: ['192.0.2.1'] },
      { denyList: () => false },
      { delay: { max: '1s' }, rules: [] as never },
      { concurrency: { limit: 2 } },
      { cost: () => 1 },
      { limit: () => 5 },
      { rules: () => slidingWindowCounter({ limit: 5, window: '1m' }) },
      { enabled: false },
    ] as HttpRateLimitOptions<Req>[]) {
      let compiled: boolean | string
      try {
        compiled = compiles(options)
      } catch (error) {
        compiled = String(error) // an option this test wrote wrong: shown below
      }
      expect(compiled, JSON.stringify(Object.keys(options))).not.toBe(true)
    }
  })

  it('is not taken by middleware built while useGeneralPipeline(true)', () => {
    useGeneralPipeline(true)
    try {
      expect(compiles({})).toBe(false)
    } finally {
      useGeneralPipeline(false)
    }
    expect(compiles({})).toBe(true)
  })

  it('decides as the general pipeline does: results, headers and statuses, request by request', async () => {
    const make = (general: boolean) => {
      useGeneralPipeline(general)
      try {
        return new HttpRateLimiter<Req>(
          { limit: 3, window: '1m', store: new MemoryStore({ clock: () => 1.8e12 }) },
          binding,
        )
      } finally {
        useGeneralPipeline(false)
      }
    }
    const compiled = make(false)
    const general = make(true)
    const view = (decision: HttpDecision | undefined) => ({
      status: decision?.statusCode,
      headers: decision?.headers,
      result: JSON.stringify(decision?.result, (key, value) => (key === 'rule' ? undefined : value)),
    })
    for (const ip of ['192.0.2.1', '192.0.2.1', '192.0.2.2', '192.0.2.1', '192.0.2.1', '2001:db8::1']) {
      expect(view(await compiled.decideNow({ ip }))).toEqual(view(await general.decideNow({ ip })))
    }
  })
})
