import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { StoreFailure, StoreGateway } from '../src/gateway/store-gateway.js'
import {
  type Decision,
  fixedWindow,
  MemoryStore,
  RateLimiter,
  type RefundRequest,
  type Store,
  type StoreRequest,
  type StoreTarget,
} from '../src/index.js'
import { CountingStore, plainStore } from './support/counting-store.js'

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
      limiter: expect.any(String),
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

describe('StoreGateway: one path for every store call', () => {
  const gatewayOf = (store: Store, onError = vi.fn()) =>
    new StoreGateway(store, {
      limiter: 'test',
      role: 'store',
      timeoutMs: 100,
      onError,
      circuitBreaker: {},
    })
  const request: StoreRequest = {
    prefix: 'p',
    key: 'k',
    rules: [fixedWindow({ limit: 1, window: '1m' })],
    cost: 1,
  }

  it('answers a synchronous store synchronously, and a throw as a reported StoreFailure', () => {
    const onError = vi.fn()
    const gateway = gatewayOf(new MemoryStore(), onError)
    const decision = gateway.decide(request, 'consume')
    expect(decision).not.toBeInstanceOf(Promise)
    expect(decision).toMatchObject({ allowed: true })
    const broken = gatewayOf(
      {
        ...new MemoryStore(),
        consume: () => {
          throw new Error('store down')
        },
        peek: () => {
          throw new Error('store down')
        },
      } as unknown as Store,
      onError,
    )
    const failure = broken.decide(request, 'consume')
    expect(failure).toBeInstanceOf(StoreFailure)
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ message: 'store down' }), {
      operation: 'consume',
      key: 'k',
      limiter: expect.any(String),
    })
  })

  it('reports a store without `charge` as a settle failure and charges nothing', async () => {
    const onError = vi.fn()
    const inner = new MemoryStore()
    const store = plainStore(inner)
    expect(await gatewayOf(store, onError).charge(request)).toBeUndefined()
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ code: 'ERR_RATEWINDOW_STORE' }), {
      operation: 'settle',
      key: 'k',
      limiter: expect.any(String),
    })
  })

  it("reports the fallback store's notices too (they were dropped before the gateway)", async () => {
    const onError = vi.fn()
    const notice = new Error('repaired a key')
    const main = new CountingStore()
    main.failing = true
    const inner = new MemoryStore()
    const fallback: Store = {
      consume: (each) => ({ ...(inner.consume(each) as Decision), notices: [notice] }),
      peek: (each) => inner.peek(each),
      refund: (each) => inner.refund(each),
      reset: (target) => inner.reset(target),
    }
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1m' }),
      store: main,
      fallback,
      onError,
    })
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'fallback' })
    expect(onError).toHaveBeenCalledWith(notice, {
      operation: 'fallback',
      key: 'k',
      limiter: expect.any(String),
    })
  })
})
