import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { failureKind } from '../src/failure.js'
import {
  type Decision,
  fixedWindow,
  MemoryStore,
  RateLimiter,
  type RefundRequest,
  type Store,
  type StoreRequest,
  type StoreTarget,
  slidingWindowCounter,
} from '../src/index.js'
import { clusterSlot } from '../src/stores/cluster-slot.js'

/** Wraps a store, counting calls and failing on demand. */
class CountingStore implements Store {
  calls = 0
  failing = false
  hang = false
  constructor(readonly inner: Store = new MemoryStore()) {}
  async consume(request: StoreRequest): Promise<Decision> {
    this.calls++
    if (this.hang) return new Promise(() => {})
    if (this.failing) throw new Error('store down')
    return this.inner.consume(request)
  }
  async peek(request: StoreRequest): Promise<Decision> {
    return this.inner.peek(request)
  }
  async refund(): Promise<void> {}
  async reset(): Promise<void> {}
}

afterEach(() => {
  vi.useRealTimers()
})

describe('failure policy', () => {
  it('answers by the policy on a timeout, without waiting for the store', async () => {
    vi.useFakeTimers()
    const store = new CountingStore()
    store.hang = true
    const onError = vi.fn()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      store,
      timeout: 100,
      onError,
    })
    const pending = limiter.limit('k')
    await vi.advanceTimersByTimeAsync(100)
    const result = await pending
    expect(result).toMatchObject({ allowed: true, source: 'policy' })
    expect(onError.mock.calls[0]![0]).toMatchObject({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' })
  })

  it("fails closed with onStoreError: 'deny'", async () => {
    const store = new CountingStore()
    store.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      store,
      onStoreError: 'deny',
      onError: () => {},
    })
    expect(await limiter.limit('k')).toMatchObject({ allowed: false, source: 'policy' })
    expect((await limiter.limit('k')).retryAfter).toBeGreaterThanOrEqual(1_000)
  })

  it('answers from the fallback store while the main one fails', async () => {
    const store = new CountingStore()
    store.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m' }),
      store,
      fallback: new MemoryStore(),
      onError: () => {},
    })
    expect((await limiter.limit('k')).source).toBe('fallback')
    expect((await limiter.limit('k')).allowed).toBe(true)
    expect((await limiter.limit('k')).allowed).toBe(false)
  })

  it('reports every failure to onError, and by default logs them throttled', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {})
    const store = new CountingStore()
    store.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      store,
      circuitBreaker: false,
    })
    for (let i = 0; i < 20; i++) await limiter.limit('k')
    expect(log).toHaveBeenCalledTimes(1)
    expect(String(log.mock.calls[0]![0])).toContain('store down')
    log.mockRestore()
  })
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

describe('blocked-key cache', () => {
  it('answers a denied key locally until retryAfter, with truthful, shrinking waits', async () => {
    let local = 0
    let storeNow = 1_700_000_000_000
    const store = new CountingStore(new MemoryStore({ clock: () => storeNow }))
    const limiter = new RateLimiter({
      rules: slidingWindowCounter({ limit: 2, window: '10s' }),
      store,
      blockedCache: { clock: () => local },
    })
    await limiter.limit('k')
    await limiter.limit('k')
    const denied = await limiter.limit('k')
    expect(denied).toMatchObject({ allowed: false, source: 'store' })
    const calls = store.calls
    for (let i = 0; i < 100; i++) expect((await limiter.limit('k')).source).toBe('cache')
    expect(store.calls).toBe(calls) // 0 store calls per cached denial
    local += 1_000
    storeNow += 1_000
    const later = await limiter.limit('k')
    expect(later).toMatchObject({ allowed: false, source: 'cache', retryAfter: denied.retryAfter - 1_000 })
    expect(later.rules[0]!.retryAfter).toBe(denied.retryAfter - 1_000)
    // A cheaper request than the denied one asks the store; so does one after the wait.
    expect((await limiter.limit('k', { cost: 0 })).source).toBe('store')
    local += denied.retryAfter
    storeNow += denied.retryAfter
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'store' })
  })

  it('reset clears the cached denial', async () => {
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1h' }), blockedCache: true })
    await limiter.limit('k')
    expect((await limiter.limit('k')).allowed).toBe(false)
    await limiter.reset('k')
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'store' })
  })
})

/** A store whose decisions are applied only when released: a Redis that stalls, then runs what it received. */
class StallingStore implements Store {
  readonly inner = new MemoryStore()
  stalled = true
  readonly #queue: (() => void)[] = []
  consume(request: StoreRequest): Decision | Promise<Decision> {
    if (!this.stalled) return this.inner.consume(request)
    return new Promise((resolve) => this.#queue.push(() => resolve(this.inner.consume(request))))
  }
  peek(request: StoreRequest) {
    return this.inner.peek(request)
  }
  refund(request: RefundRequest) {
    return this.inner.refund(request)
  }
  reset(target: StoreTarget) {
    return this.inner.reset(target)
  }
  /** The stall ends: every queued decision runs, in order. */
  release(): void {
    this.stalled = false
    for (const run of this.#queue.splice(0)) run()
  }
}

const never = () => new Promise<never>(() => {})

describe('failure scopes', () => {
  /** Scope = the key's first letter; keys starting with `dead` fail as a dead shard would. */
  class ShardedStore extends CountingStore {
    scopeOf(target: StoreTarget) {
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
    expect(contexts[0]).toEqual({ operation: 'consume', key: 'dead', scope: 'd' })
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

describe('decisions that time out', () => {
  it("with 'deny', a refused request charged late by the store is refunded", async () => {
    vi.useFakeTimers()
    const store = new StallingStore()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '15m' }),
      store,
      timeout: 100,
      onStoreError: 'deny',
      onError: () => {},
      circuitBreaker: false, // five timeouts would open it: this test asks the store again at once
    })
    const refused = Array.from({ length: 5 }, () => limiter.limit('login:alice'))
    await vi.advanceTimersByTimeAsync(100)
    for (const result of await Promise.all(refused))
      expect(result).toMatchObject({ allowed: false, source: 'policy' })
    store.release() // the stall ends: the store applies the five decisions it received
    await vi.advanceTimersByTimeAsync(0)
    const after = await Promise.all(Array.from({ length: 6 }, () => limiter.limit('login:alice')))
    expect(after.map((result) => result.allowed)).toEqual([true, true, true, true, true, false])
  })

  it("with 'allow', a request let through and charged late stays charged (it was served)", async () => {
    vi.useFakeTimers()
    const store = new StallingStore()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '15m' }),
      store,
      timeout: 100,
      onError: () => {},
    })
    const served = Array.from({ length: 3 }, () => limiter.limit('k'))
    await vi.advanceTimersByTimeAsync(100)
    for (const result of await Promise.all(served))
      expect(result).toMatchObject({ allowed: true, source: 'policy' })
    store.release()
    await vi.advanceTimersByTimeAsync(0)
    expect((await limiter.limit('k')).remaining).toBe(1)
  })

  it('a late charge is refunded when the fallback refused the request, and kept when it admitted it', async () => {
    vi.useFakeTimers()
    const store = new StallingStore()
    const fallback = new MemoryStore()
    const rules = fixedWindow({ limit: 2, window: '15m' })
    const limiter = new RateLimiter({ rules, store, timeout: 100, fallback, onError: () => {} })
    const target = { prefix: limiter.namespace, key: 'spent', rules: [rules], cost: 1 }
    fallback.consume(target)
    fallback.consume(target) // this process has used up 'spent' while Redis was away
    const answers = [limiter.limit('spent'), limiter.limit('spent'), limiter.limit('fresh')]
    await vi.advanceTimersByTimeAsync(100)
    expect((await Promise.all(answers)).map((result) => [result.source, result.allowed])).toEqual([
      ['fallback', false],
      ['fallback', false],
      ['fallback', true],
    ])
    store.release() // the store admits all three late
    await vi.advanceTimersByTimeAsync(0)
    const remaining = (key: string) => store.inner.peek({ ...target, key, cost: 0 }).outcomes[0]!.remaining
    expect(remaining('spent')).toBe(2) // refused twice: both late charges refunded
    expect(remaining('fresh')).toBe(1) // served: its charge stands
  })
})

describe('nothing passed in can hang or crash', () => {
  it('a hung fallback is waited on for `timeout` too, then the policy answers', async () => {
    vi.useFakeTimers()
    const store = new CountingStore()
    store.hang = true
    const fallback = new CountingStore()
    fallback.hang = true
    const onError = vi.fn()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store,
      fallback,
      timeout: 100,
      onStoreError: 'deny',
      onError,
    })
    let settled = false
    const pending = limiter.limit('k').finally(() => {
      settled = true
    })
    await vi.advanceTimersByTimeAsync(199)
    expect(settled).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    expect(await pending).toMatchObject({ allowed: false, source: 'policy' })
    expect(onError.mock.calls.map(([error, context]) => [error.code, context.operation])).toEqual([
      ['ERR_RATEWINDOW_STORE_TIMEOUT', 'consume'],
      ['ERR_RATEWINDOW_STORE_TIMEOUT', 'fallback'],
    ])
  })

  it('a fallback that keeps failing gets a breaker of its own', async () => {
    const store = new CountingStore()
    store.failing = true
    const fallback = new CountingStore()
    fallback.failing = true
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store,
      fallback,
      onError: () => {},
      circuitBreaker: { failures: 2, cooldown: 60_000 },
    })
    for (let i = 0; i < 10; i++) expect((await limiter.limit('k')).source).toBe('policy')
    expect(fallback.calls).toBe(2)
  })

  it('refund() settles after `timeout` on a hung store and reports it; reset() rejects with a timeout', async () => {
    vi.useFakeTimers()
    const onError = vi.fn()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store: { consume: never, peek: never, refund: never, reset: never },
      timeout: 100,
      onError,
    })
    const refund = limiter.refund({ key: 'k', cost: 1, at: 0, allowed: true, source: 'store' })
    const reset = limiter.reset('k')
    const resetFailure = expect(reset).rejects.toMatchObject({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' })
    await vi.advanceTimersByTimeAsync(100)
    await expect(refund).resolves.toBeUndefined()
    await resetFailure
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' }), {
      operation: 'refund',
      key: 'k',
    })
  })

  it('reset() times out on a hung fallback as well', async () => {
    vi.useFakeTimers()
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      fallback: { consume: never, peek: never, refund: never, reset: never },
      timeout: 100,
    })
    const reset = expect(limiter.reset('k')).rejects.toThrow('fallback.reset took longer than 100 ms')
    await vi.advanceTimersByTimeAsync(100)
    await reset
  })

  describe('an onError that throws or rejects', () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    beforeEach(() => {
      unhandled.length = 0
      process.on('unhandledRejection', onUnhandled)
    })
    afterEach(() => {
      process.off('unhandledRejection', onUnhandled)
    })

    it.each([
      [
        'throws',
        () => {
          throw new Error('onError is broken')
        },
      ],
      ['rejects', async () => Promise.reject(new Error('onError is broken'))],
    ])('%s: limit() and refund() still resolve, and a warning says so', async (_name, onError) => {
      const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
      const store = new CountingStore()
      store.failing = true
      store.refund = async () => {
        throw new Error('refund failed')
      }
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 5, window: '1m' }),
        store,
        onStoreError: 'deny',
        onError,
      })
      expect(await limiter.limit('k')).toMatchObject({ allowed: false, source: 'policy' })
      await expect(
        limiter.refund({ key: 'k', cost: 1, at: 0, allowed: true, source: 'store' }),
      ).resolves.toBeUndefined()
      await new Promise((resolve) => setImmediate(resolve))
      expect(unhandled).toEqual([])
      expect(warn).toHaveBeenCalledTimes(1) // throttled: one warning for both failures
      expect(warn.mock.calls[0]).toEqual([
        expect.stringContaining('onError is broken'),
        { code: 'RATEWINDOW_ONERROR_FAILED' },
      ])
      warn.mockRestore()
    })
  })

  it('a store answering with thenables that are not native promises works', async () => {
    const inner = new MemoryStore()
    // biome-ignore lint/suspicious/noThenProperty: a thenable that is not a Promise, on purpose
    const thenable = <T>(value: T) => ({ then: (resolve: (value: T) => void) => resolve(value) })
    const store = {
      consume: (request: StoreRequest) => thenable(inner.consume(request)),
      peek: (request: StoreRequest) => thenable(inner.peek(request)),
      refund: (request: RefundRequest) => inner.refund(request),
      reset: (target: StoreTarget) => inner.reset(target),
    } as unknown as Store
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1, window: '1m' }), store })
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'store' })
    expect(await limiter.limit('k')).toMatchObject({ allowed: false, source: 'store' })
  })
})

describe('clusterSlot', () => {
  it.each([
    ['123456789', 12739],
    ['foo', 12182],
    ['bar', 5061],
    ['foo{}{bar}', 8363], // an empty tag: the whole key
    ['foo{{bar}}zap', 4015], // the tag is `{bar`
    ['foo{bar}{zap}', 5061], // the first tag only
    ['rw{é日本}:x', 1826], // UTF-8 bytes
    ['{user1000}.following', 3443],
  ])('%s is in slot %i, as CLUSTER KEYSLOT says', (key, slot) => {
    expect(clusterSlot(key)).toBe(slot)
  })
})
