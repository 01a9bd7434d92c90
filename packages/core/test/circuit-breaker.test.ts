import { afterEach, describe, expect, it, vi } from 'vitest'
import { type Decision, fixedWindow, RateLimiter, type StoreRequest, type StoreTarget } from '../src/index.js'
import { failureKind } from '../src/stores/failure-kind.js'
import { CountingStore } from './support/counting-store.js'

afterEach(() => {
  vi.useRealTimers()
})

describe('circuit breaker', () => {
  it('stops calling a failing store, probes it after the cooldown, and closes on success', async () => {
    let now = 0
    const store = new CountingStore()
    store.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 100, window: '1m' }),
      store,
      onError: () => {},
      circuitBreaker: { failures: 3, cooldown: 1_000, clock: () => now },
    })
    for (let i = 0; i < 10; i++) expect((await limiter.limit('k')).source).toBe('policy')
    expect(store.calls).toBe(3) // open after 3 failures: the other 7 never waited on the store
    now = 999
    await limiter.limit('k')
    expect(store.calls).toBe(3)
    now = 1_000
    await limiter.limit('k') // the probe fails: open again
    expect(store.calls).toBe(4)
    now = 2_000
    store.failing = false
    expect((await limiter.limit('k')).source).toBe('store') // the probe succeeds: closed
    expect((await limiter.limit('k')).source).toBe('store')
    expect(store.calls).toBe(6)
  })
})

describe('failure scopes', () => {
  /** Scope = the key's first letter; keys starting with `dead` fail as a dead shard would. */
  class ShardedStore extends CountingStore {
    failureDomainOf(target: StoreTarget) {
      return target.key[0]
    }
    override async consume(request: StoreRequest): Promise<Decision> {
      this.calls++
      if (request.key.startsWith('d')) throw new Error('connect ECONNREFUSED')
      return this.inner.consume(request)
    }
  }

  it('a failing scope opens its own breaker; other scopes keep exact limits from the store', async () => {
    const store = new ShardedStore()
    const contexts: unknown[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 10, window: '1m' }),
      store,
      onError: (_error, context) => contexts.push(context),
      circuitBreaker: { failures: 3, cooldown: 60_000 },
    })
    const sources = { dead: [] as string[], alive: [] as string[] }
    let admitted = 0
    for (let i = 0; i < 20; i++) {
      sources.dead.push((await limiter.limit('dead')).source)
      const alive = await limiter.limit('alive')
      sources.alive.push(alive.source)
      if (alive.allowed) admitted++
    }
    expect(sources.dead).toEqual(Array(20).fill('policy'))
    expect(sources.alive).toEqual(Array(20).fill('store'))
    expect(admitted).toBe(10) // exactly the limit
    expect(store.calls).toBe(3 + 20) // the dead scope was called until its breaker opened, the live one always
    expect(contexts[0]).toEqual({
      operation: 'consume',
      key: 'dead',
      domain: 'd',
      scope: 'd', // the deprecated name, until 1.0
      limiter: expect.any(String),
    })
  })

  it("a custom store written against 0.1's `scopeOf` still gets one breaker per failure domain", async () => {
    class OldShardedStore extends CountingStore {
      scopeOf(target: StoreTarget) {
        return target.key[0]
      }
      override async consume(request: StoreRequest): Promise<Decision> {
        if (request.key.startsWith('d')) throw new Error('connect ECONNREFUSED')
        return this.inner.consume(request)
      }
    }
    const contexts: { domain?: unknown }[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 10, window: '1m' }),
      store: new OldShardedStore(),
      onError: (_error, context) => contexts.push(context),
      circuitBreaker: { failures: 1, cooldown: 60_000 },
    })
    await limiter.limit('dead')
    expect((await limiter.limit('dead')).source).toBe('policy')
    expect((await limiter.limit('alive')).source).toBe('store')
    expect(contexts[0]?.domain).toBe('d')
  })

  it('an error about one key (WRONGTYPE, a script error) opens no breaker', async () => {
    class WrongTypeStore extends CountingStore {
      override async consume(request: StoreRequest): Promise<Decision> {
        this.calls++
        if (request.key === 'bad') {
          throw Object.assign(
            new Error('WRONGTYPE Operation against a key holding the wrong kind of value'),
            {
              name: 'ReplyError',
            },
          )
        }
        return this.inner.consume(request)
      }
    }
    const store = new WrongTypeStore()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store,
      onError: () => {},
      circuitBreaker: { failures: 3, cooldown: 60_000 },
    })
    for (let i = 0; i < 10; i++) expect((await limiter.limit('bad')).source).toBe('policy')
    expect(store.calls).toBe(10) // every request still asked the store: no breaker opened
    const others = await Promise.all(Array.from({ length: 8 }, () => limiter.limit('good')))
    expect(others.map((result) => result.source)).toEqual(Array(8).fill('store'))
    expect(others.filter((result) => result.allowed)).toHaveLength(5)
  })

  it('classifies errors by where they belong', () => {
    const reply = (message: string) => Object.assign(new Error(message), { name: 'ReplyError' })
    expect(failureKind(reply('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBe(
      'key',
    )
    expect(failureKind(reply('ERR user_script:12: attempt to compare nil with number'))).toBe('key')
    expect(failureKind(reply('ERR Error running script (call to f_1): @user_script:1: boom'))).toBe('key')
    expect(failureKind(Object.assign(new Error('custom'), { kind: 'key' }))).toBe('key')
    expect(failureKind(reply('CLUSTERDOWN Hash slot not served'))).toBe('scope')
    expect(failureKind(reply("OOM command not allowed when used memory > 'maxmemory'."))).toBe('scope')
    expect(failureKind(reply('BUSY Redis is busy running a script.'))).toBe('scope')
    expect(failureKind(new Error('connect ECONNREFUSED 127.0.0.1:6379'))).toBe('scope')
    expect(failureKind('a string')).toBe('scope')
    expect(failureKind(null)).toBe('scope')
  })

  it('a probe answered by a key error closes the circuit (the server answered)', async () => {
    let now = 0
    let mode: 'down' | 'wrongtype' | 'up' = 'down'
    const store = new CountingStore()
    store.consume = async (request) => {
      store.calls++
      if (mode === 'down') throw new Error('ETIMEDOUT')
      if (mode === 'wrongtype') throw new Error('WRONGTYPE Operation against a key')
      return store.inner.consume(request)
    }
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 100, window: '1m' }),
      store,
      onError: () => {},
      circuitBreaker: { failures: 2, cooldown: 1_000, clock: () => now },
    })
    for (let i = 0; i < 4; i++) await limiter.limit('k')
    expect(store.calls).toBe(2)
    now = 1_000
    mode = 'wrongtype'
    await limiter.limit('k') // the probe: a key error
    mode = 'up'
    expect((await limiter.limit('other')).source).toBe('store')
    expect(store.calls).toBe(4)
  })
})
