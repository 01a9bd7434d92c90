import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { fixedWindow, MemoryStore, RateLimiter, type Store } from '../src/index.js'

/** A store that answers through `wrap`: a custom store built on another promise implementation. */
function wrappedStore(wrap: <T>(value: T) => PromiseLike<T>): Store {
  const inner = new MemoryStore({ clock: () => 1_000_000 })
  return {
    consume: (request) => wrap(inner.consume(request)) as never,
    peek: (request) => wrap(inner.peek(request)) as never,
    refund: (request) => wrap(inner.refund(request)) as never,
    reset: (target) => wrap(inner.reset(target)) as never,
  }
}

describe('custom stores', () => {
  it.each([
    // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose
    ['a bare thenable', <T>(value: T) => ({ then: (resolve: (v: T) => void) => resolve(value) })],
    ["another realm's promise", <T>(value: T) => runInNewContext('Promise.resolve(value)', { value })],
  ])('answering with %s: limits hold, the store is the source', async (_, wrap) => {
    const errors: unknown[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m' }),
      store: wrappedStore(wrap as <T>(value: T) => PromiseLike<T>),
      onError: (error) => errors.push(error),
    })
    const results = [await limiter.limit('k'), await limiter.limit('k'), await limiter.limit('k')]
    expect(results.map((result) => [result.allowed, result.source])).toEqual([
      [true, 'store'],
      [true, 'store'],
      [false, 'store'],
    ])
    expect(results[2]!.retryAfter).toBeGreaterThan(0)
    expect(errors).toEqual([])
  })

  it('a thenable that never settles is cut by the timeout like a promise', async () => {
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 2, window: '1m' }),
      // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose
      store: wrappedStore(<T>() => ({ then: () => undefined }) as unknown as PromiseLike<T>),
      timeout: 20,
      onError: () => {},
    })
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'policy' })
  })
})
