/**
 * Observer events: every decision outcome, store latency and errors by kind, circuit breaker changes, and shadow
 * mode, each produced by a real scenario (a killed redis-server, a SIGSTOP stall, a key of the wrong type).
 */
import {
  combineObservers,
  fixedWindow,
  MemoryStore,
  RateLimitError,
  RateLimiter,
  RedisStore,
  slidingWindowCounter,
} from '@ratewindow/core'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from './support/clock.js'
import { until } from './support/connections.js'
import { recorder } from './support/recorder.js'
import { standaloneClient } from './support/redis.js'
import { RedisServer } from './support/redis-server.js'
import { unhandledRejections } from './support/unhandled.js'

const unhandled = unhandledRejections()
afterAll(() => {
  expect(unhandled).toEqual([])
})

let prefixes = 0
const prefix = () => `obs${++prefixes}`

describe('decision events on a memory store', () => {
  it('reports allowed, limited, and limited from the blocked-key cache, with limiter and rule names', async () => {
    const seen = recorder()
    const limiter = new RateLimiter({
      rules: [fixedWindow({ limit: 2, window: '1m', name: 'minute' })],
      name: 'login',
      blockedCache: true,
      observer: seen.observer,
    })
    for (let i = 0; i < 4; i++) await limiter.limit('alice')
    expect(seen.outcomes()).toEqual(['allowed/store', 'allowed/store', 'limited/store', 'limited/cache'])
    expect(seen.decisions.map((event) => [event.limiter, event.rule])).toEqual(
      Array(4).fill(['login', 'minute']),
    )
    // The cache answered the fourth: three store calls, each timed.
    expect(seen.calls).toHaveLength(3)
    for (const call of seen.calls) {
      expect(call).toMatchObject({ limiter: 'login', store: 'store', operation: 'consume' })
      expect(call.durationMs).toBeGreaterThanOrEqual(0)
      expect(call.error).toBeUndefined()
    }
  })

  it('names a limiter by its namespace by default, and reports no event for peek', async () => {
    const seen = recorder()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      observer: seen.observer,
    })
    await limiter.peek('bob')
    await limiter.limit('bob', { route: '/users/:id' })
    expect(seen.decisions).toHaveLength(1)
    expect(seen.decisions[0]).toMatchObject({ limiter: limiter.namespace, route: '/users/:id' })
  })

  it('refuses a bad observer at construction', () => {
    const rules = fixedWindow({ limit: 1, window: '1m' })
    expect(() => new RateLimiter({ rules, observer: { onDecison: () => {} } as never })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION' }),
    )
    expect(() => new RateLimiter({ rules, observer: { onDecision: 1 } as never })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'observer.onDecision' }),
    )
    expect(() => new RateLimiter({ rules, shadow: 'yes' as never })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'shadow' }),
    )
    expect(() => fixedWindow({ limit: 1, window: '1m', shadow: 1 as never })).toThrow(RateLimitError)
    expect(() => new RateLimiter({ rules, name: '' })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'name' }),
    )
  })

  it('a throwing or rejecting observer never breaks a decision, and warns', async () => {
    const warnings: string[] = []
    const onWarning = (warning: Error & { code?: string }) => warnings.push(warning.code ?? '')
    process.on('warning', onWarning)
    try {
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 1, window: '1m' }),
        observer: {
          onDecision: () => {
            throw new Error('observer bug')
          },
          onStoreCall: () => Promise.reject(new Error('async observer bug')),
        },
      })
      expect((await limiter.limit('carol')).allowed).toBe(true)
      expect((await limiter.limit('carol')).allowed).toBe(false)
      await new Promise((resolve) => setImmediate(resolve))
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', onWarning)
    }
    expect(warnings.filter((code) => code === 'RATEWINDOW_OBSERVER_FAILED').length).toBeGreaterThanOrEqual(2)
  })
})

describe('shadow mode', () => {
  it('a shadow limiter lets every request through, counts, and reports shadow-limited', async () => {
    const seen = recorder()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m' }),
      shadow: true,
      observer: seen.observer,
    })
    const results = await Promise.all([1, 2, 3, 4].map(() => limiter.limit('dave')))
    expect(results.map((result) => [result.allowed, result.shadow])).toEqual([
      [true, undefined],
      [true, undefined],
      [true, true],
      [true, true],
    ])
    expect(results[3]!.rules[0]!.allowed).toBe(false)
    expect(await limiter.peek('dave')).toMatchObject({ allowed: true, shadow: true })
    expect(seen.outcomes()).toEqual([
      'allowed/store',
      'allowed/store',
      'shadow-limited/store',
      'shadow-limited/store',
    ])
  })

  it('a shadow rule next to an enforcing one: the enforcing rule still counts and limits', async () => {
    const seen = recorder()
    const limiter = new RateLimiter({
      rules: [
        fixedWindow({ limit: 2, window: '1m', name: 'strict', shadow: true }),
        fixedWindow({ limit: 4, window: '1h', name: 'hourly' }),
      ],
      observer: seen.observer,
    })
    const results = []
    for (let i = 0; i < 5; i++) results.push(await limiter.limit('erin'))
    expect(results.map((result) => result.allowed)).toEqual([true, true, true, true, false])
    expect(results.map((result) => result.shadow)).toEqual([undefined, undefined, true, true, undefined])
    expect(seen.outcomes()).toEqual([
      'allowed/store',
      'allowed/store',
      'shadow-limited/store',
      'shadow-limited/store',
      'limited/store',
    ])
    // The shadow-limited results keep every rule in order: the shadow one as it would have refused.
    expect(results[2]!.rules.map((rule) => [rule.rule.name, rule.allowed])).toEqual([
      ['strict', false],
      ['hourly', true],
    ])
    expect(results[4]!.rule.name).toBe('hourly')
  })

  it('a penalty on a shadow limiter: the block is reported as shadow-limited, with the time it would last', async () => {
    const seen = recorder()
    const clock = new ManualClock(1_700_000_000_000)
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1s', name: 'second' }),
      store: new MemoryStore({ clock: clock.read }),
      shadow: true,
      penalty: { after: 1, within: '1m', block: '10s' },
      observer: seen.observer,
    })
    const first = await limiter.limit('hugo')
    const denial = await limiter.limit('hugo') // starts the block
    clock.advance(5_000)
    const blocked = await limiter.limit('hugo') // the rule admits; only the block would refuse
    clock.advance(5_000)
    const free = await limiter.limit('hugo')
    expect(
      [first, denial, blocked, free].map((result) => [result.allowed, result.shadow, result.blocked]),
    ).toEqual([
      [true, undefined, undefined],
      [true, true, 10_000],
      [true, true, 5_000],
      [true, undefined, undefined],
    ])
    expect(blocked).toMatchObject({ retryAfter: 0, remaining: 0 })
    expect(blocked.rules[0]!.allowed).toBe(true)
    expect(seen.outcomes()).toEqual([
      'allowed/store',
      'shadow-limited/store',
      'shadow-limited/store',
      'allowed/store',
    ])
    expect(seen.decisions.map((event) => event.rule)).toEqual(['second', 'second', 'second', 'second'])
  })

  it('a penalty beside a shadow rule follows the enforcing rules only: shadow denials start no block', async () => {
    const seen = recorder()
    const limiter = new RateLimiter({
      rules: [
        fixedWindow({ limit: 1, window: '1m', name: 'burst', shadow: true }),
        fixedWindow({ limit: 4, window: '1h', name: 'hourly' }),
      ],
      penalty: { after: 1, within: '1h', block: '10m' },
      observer: seen.observer,
    })
    const results = []
    for (let i = 0; i < 6; i++) results.push(await limiter.limit('kate'))
    expect(results.map((result) => [result.allowed, result.blocked !== undefined])).toEqual([
      [true, false],
      [true, false],
      [true, false],
      [true, false],
      [false, true], // the enforcing rule's first denial starts the block
      [false, true],
    ])
    expect(results[4]!.blocked).toBe(600_000)
    expect(seen.outcomes()).toEqual([
      'allowed/store',
      'shadow-limited/store',
      'shadow-limited/store',
      'shadow-limited/store',
      'blocked/store', // a penalty block, counted apart from the rules' denials (issue 20)
      'blocked/store',
    ])
  })

  it('refunding a shadow-limited result of a shadow limiter gives back nothing (it was charged nothing)', async () => {
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), shadow: true })
    await limiter.limit('iris')
    await limiter.limit('iris')
    const over = await limiter.limit('iris')
    expect(over.shadow).toBe(true)
    await limiter.refund(over)
    // Still two counted: the next request is shadow-limited too.
    expect(await limiter.limit('iris')).toMatchObject({ allowed: true, shadow: true, remaining: 0 })
    // An admitted request's refund still gives back its charge.
    const admitted = await limiter.limit('jack')
    await limiter.refund(admitted)
    expect((await limiter.peek('jack', { cost: 0 })).remaining).toBe(2)
  })

  it('settling a shadow-limited result of a shadow limiter neither gives back nor charges (it was charged nothing)', async () => {
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), shadow: true })
    await limiter.limit('kim')
    await limiter.limit('kim')
    const over = await limiter.limit('kim')
    expect(over.shadow).toBe(true)
    // Downwards: a refund of 1 would free a unit that was never counted.
    expect(await limiter.settle({ ...over }, 0)).toEqual({ charged: 0, refunded: 0, uncharged: 0 })
    // Upwards: a charge would count what the rules refused.
    expect(await limiter.settle({ ...over }, 3)).toEqual({ charged: 0, refunded: 0, uncharged: 2 })
    expect((await limiter.peek('kim', { cost: 0 })).remaining).toBe(0)
    expect(await limiter.limit('kim')).toMatchObject({ allowed: true, shadow: true })
    // An admitted request still settles as before.
    const admitted = await limiter.limit('lou')
    expect(await limiter.settle(admitted, 0)).toEqual({ charged: 0, refunded: 1, uncharged: 0 })
    expect((await limiter.peek('lou', { cost: 0 })).remaining).toBe(2)
  })

  it('switching a rule from shadow to enforcing keeps its counters (same namespace)', () => {
    const shadow = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m', shadow: true }),
      prefix: 'sw',
    })
    shadow.release()
    const enforcing = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), prefix: 'sw' })
    expect(enforcing.namespace).toBe(shadow.namespace)
  })
})

describe('events with Redis faults', () => {
  let server: RedisServer
  let client: Redis

  beforeAll(async () => {
    server = await RedisServer.start()
    client = new Redis({
      host: '127.0.0.1',
      port: server.port,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: false,
      connectTimeout: 500,
      retryStrategy: () => 50,
    })
    client.on('error', () => {})
  })
  afterAll(async () => {
    client.disconnect()
    await server.stop()
  })

  it('shadow mode on Redis: the enforcing rule counts alone', async () => {
    const seen = recorder()
    const limiter = new RateLimiter({
      rules: [
        slidingWindowCounter({ limit: 1, window: '1m', name: 'burst', shadow: true }),
        fixedWindow({ limit: 3, window: '1h', name: 'hourly' }),
      ],
      store: new RedisStore({ client: standaloneClient(server.port) }),
      prefix: prefix(),
      observer: seen.observer,
      // Not a test of timeouts: a loaded CI machine must not turn a slow answer into the failure policy's.
      timeout: '10s',
    })
    const results = []
    for (let i = 0; i < 4; i++) results.push(await limiter.limit('frank'))
    expect(results.map((result) => [result.allowed, result.shadow ?? false])).toEqual([
      [true, false],
      [true, true],
      [true, true],
      [false, false],
    ])
    expect(seen.outcomes()).toEqual([
      'allowed/store',
      'shadow-limited/store',
      'shadow-limited/store',
      'limited/store',
    ])
  })

  it('a killed server: failed open, failed closed, fallback, scope errors and the breaker opening and closing', async () => {
    const seen = recorder()
    const clock = new ManualClock(0)
    const common = {
      rules: fixedWindow({ limit: 1, window: '1m', name: 'minute' }),
      store: new RedisStore({ client }),
      timeout: '300ms',
      onError: () => {},
      observer: seen.observer,
    } as const
    const open = new RateLimiter({
      ...common,
      prefix: prefix(),
      name: 'open',
      circuitBreaker: { failures: 2, cooldown: 1_000, clock: clock.read },
    })
    const closed = new RateLimiter({ ...common, prefix: prefix(), name: 'closed', onStoreError: 'deny' })
    const fallback = new RateLimiter({
      ...common,
      prefix: prefix(),
      name: 'fallback',
      fallback: new MemoryStore(),
    })
    expect((await open.limit('gina')).allowed).toBe(true)
    await server.kill()
    try {
      await open.limit('gina')
      await open.limit('gina') // opens the circuit
      await open.limit('gina') // the open circuit answers without the store
      await closed.limit('gina')
      await fallback.limit('gina')
      await fallback.limit('gina')
    } finally {
      await server.restart()
    }
    const outcomes = (name: string) => seen.outcomes(name)
    expect(outcomes('open')).toEqual([
      'allowed/store',
      'failed-open/policy',
      'failed-open/policy',
      'failed-open/policy',
    ])
    expect(outcomes('closed')).toEqual(['failed-closed/policy'])
    expect(outcomes('fallback')).toEqual(['allowed/fallback', 'limited/fallback'])
    const failures = seen.calls.filter((call) => call.error !== undefined)
    // Two calls of `open` (the third skipped by the open circuit), one of `closed`, two of `fallback`.
    expect(failures.map((call) => [call.limiter, call.store, call.errorKind])).toEqual([
      ['open', 'store', 'scope'],
      ['open', 'store', 'scope'],
      ['closed', 'store', 'scope'],
      ['fallback', 'store', 'scope'],
      ['fallback', 'store', 'scope'],
    ])
    expect(seen.calls.filter((call) => call.store === 'fallback' && call.error === undefined)).toHaveLength(2)
    // The server is back: after the cooldown one probe is let through and closes the circuit.
    clock.advance(1_000)
    let probes = 0
    await until(
      async () => {
        if ((await open.limit(`probe${probes++}`)).source === 'store') return true
        clock.advance(1_000)
        return false
      },
      'a probe reaches the restarted server and closes the circuit',
      { within: 10_000, every: 50 },
    )
    const changes = seen.breakers.filter((event) => event.limiter === 'open').map((e) => `${e.from}>${e.to}`)
    expect(changes[0]).toBe('closed>open')
    expect(changes).toContain('open>half-open')
    expect(changes.at(-1)).toBe('half-open>closed')
  })

  it('a stalled server (SIGSTOP): a timeout error and the failure policy', async () => {
    const seen = recorder()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store: new RedisStore({ client }),
      prefix: prefix(),
      timeout: '150ms',
      onError: () => {},
      circuitBreaker: false,
      observer: seen.observer,
    })
    await limiter.limit('hank') // loads the script while the server answers
    const pid = Number(/process_id:(\d+)/.exec(await server.cli('info', 'server'))![1])
    process.kill(pid, 'SIGSTOP')
    try {
      await limiter.limit('hank')
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    await client.ping()
    expect(seen.outcomes()).toEqual(['allowed/store', 'failed-open/policy'])
    const failed = seen.calls.find((call) => call.error !== undefined)!
    expect(failed.errorKind).toBe('timeout')
    expect(failed.durationMs).toBeGreaterThanOrEqual(100)
  })

  it('an error about one key (kind "key"): reported as such, and the breaker stays closed', async () => {
    const seen = recorder()
    const memory = new MemoryStore()
    const store = Object.assign(Object.create(memory) as MemoryStore, {
      consume: () => Promise.reject(Object.assign(new Error('bad data for this key'), { kind: 'key' })),
    })
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store,
      onError: () => {},
      circuitBreaker: { failures: 1 },
      observer: seen.observer,
    })
    await limiter.limit('ivy')
    await limiter.limit('ivy')
    expect(seen.calls.map((call) => call.errorKind)).toEqual(['key', 'key'])
    expect(seen.outcomes()).toEqual(['failed-open/policy', 'failed-open/policy'])
    expect(seen.breakers).toEqual([])
  })
})

describe('combineObservers (issue 20)', () => {
  it('calls each observer in order; one that throws neither stops the next nor reaches the request', async () => {
    const calls: string[] = []
    const warnings: string[] = []
    const onWarning = (warning: Error & { code?: string }) => void warnings.push(warning.code ?? '')
    process.on('warning', onWarning)
    try {
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 1, window: '1m' }),
        observer: combineObservers(
          { onDecision: (event) => void calls.push(`metrics:${event.outcome}`) },
          undefined,
          {
            onDecision: () => {
              throw new Error('broken logger')
            },
          },
          { onDecision: (event) => void calls.push(`route:${event.outcome}`), onStoreCall: () => {} },
        ),
      })
      expect((await limiter.limit('k')).allowed).toBe(true)
      expect((await limiter.limit('k')).allowed).toBe(false)
      expect(calls).toEqual(['metrics:allowed', 'route:allowed', 'metrics:limited', 'route:limited'])
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings).toContain('RATEWINDOW_OBSERVER_FAILED')
    } finally {
      process.off('warning', onWarning)
    }
  })

  it('has only the callbacks some observer has', () => {
    expect(Object.keys(combineObservers({ onBreaker: () => {} }, {}))).toEqual(['onBreaker'])
  })
})
