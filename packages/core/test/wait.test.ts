/**
 * Issue 24: `limiter.wait()` and `schedule()` on the memory store, time driven by fake timers (the store's default
 * clock is `Date.now()`; the waits run on `performance.now()` and `setTimeout`: advancing them moves all three).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  type DecisionEvent,
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimiter,
  type RateLimiterOptions,
  type Store,
  slidingWindowCounter,
  tokenBucket,
  WaitExceededError,
} from '../src/index.js'
import { plainStore } from './support/counting-store.js'

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'], now: 1_700_000_000_000 })
})
afterEach(() => {
  vi.useRealTimers()
})

/** 1 per second, no burst: slots at 0, 1000, 2000, … ms. */
function limiter(more: Partial<RateLimiterOptions> = {}) {
  return new RateLimiter({
    rules: gcra({ limit: 1, window: '1s', burst: 1 }),
    store: new MemoryStore(),
    ...more,
  })
}

/** Starts `wait`s and records the order in which they resolve (or reject). */
function track(promises: Promise<unknown>[]) {
  const done: (number | string)[] = []
  promises.forEach((promise, i) => {
    promise.then(
      () => done.push(i),
      (error: { code?: unknown; name?: string }) =>
        done.push(`${i}:${typeof error.code === 'string' ? error.code : error.name}`),
    )
  })
  return done
}

const settle = () => vi.advanceTimersByTimeAsync(0)

describe('RateLimiter.wait (issue 24)', () => {
  it('each call goes at its reserved slot, first come first served, with one timer for all', async () => {
    const api = limiter()
    const done = track(Array.from({ length: 5 }, () => api.wait('k')))
    await settle()
    expect(done).toEqual([0])
    // One timer for the four waiting calls, not one each.
    expect(vi.getTimerCount()).toBe(1)
    expect(api.waiting.size).toBe(4)
    await vi.advanceTimersByTimeAsync(999)
    expect(done).toEqual([0])
    await vi.advanceTimersByTimeAsync(1)
    expect(done).toEqual([0, 1])
    await vi.advanceTimersByTimeAsync(3_000)
    expect(done).toEqual([0, 1, 2, 3, 4])
    expect(vi.getTimerCount()).toBe(0)
  })

  it('resolves with the slot: `delay` waited, `at` the slot time, remaining 0', async () => {
    const api = limiter()
    await api.wait('k')
    const waiting = api.wait('k')
    await vi.advanceTimersByTimeAsync(1_000)
    expect(await waiting).toMatchObject({ allowed: true, delay: 1_000, at: Date.now(), remaining: 0 })
  })

  it('rejects at once beyond maxWait, typed and named, and reserves nothing', async () => {
    const api = limiter()
    await api.wait('k')
    await expect(api.wait('k', { maxWait: 500 })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_WAIT_EXCEEDED',
      retryAfter: 1_000,
    })
    const error = await api.wait('k', { maxWait: 0 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(WaitExceededError)
    // Nothing was reserved: the next call still gets the first free slot.
    const next = api.wait('k', { maxWait: '2s' })
    await vi.advanceTimersByTimeAsync(1_000)
    expect((await next).delay).toBe(1_000)
  })

  it('an abort while waiting rejects with its reason and gives the slot back to the next caller', async () => {
    const api = limiter()
    await api.wait('k')
    const controller = new AbortController()
    const first = api.wait('k')
    const aborted = api.wait('k', { signal: controller.signal })
    const done = track([first, aborted])
    await settle()
    controller.abort()
    await settle()
    expect(done).toEqual(['1:AbortError'])
    expect(api.waiting.size).toBe(1)
    // The aborted call's slot (2000 ms) is free again: the next call takes it, not 3000 ms.
    const next = api.wait('k')
    await settle()
    await vi.advanceTimersByTimeAsync(2_000)
    expect((await next).delay).toBe(2_000)
    expect(done).toEqual(['1:AbortError', 0])
  })

  describe.each([
    ['GCRA', () => gcra({ limit: 10, window: '1s', burst: 1 })],
    ['token bucket', () => tokenBucket({ capacity: 1, refillRate: 10, interval: '1s' })],
  ])('%s, 10 a second: a waiter leaving the middle of the queue (issue 32)', (_, rule) => {
    /** `count` waits, each with its own controller; answers the limiter, the waits and the controllers. */
    async function queue(count: number) {
      const api = limiter({ rules: rule() })
      const controllers = Array.from({ length: count }, () => new AbortController())
      const waits = controllers.map((controller) => api.wait('k', { signal: controller.signal }))
      for (const each of waits) each.catch(() => {})
      await settle()
      return { api, controllers, waits }
    }

    it('leaves its slot empty: no new caller gets a slot a live waiter holds', async () => {
      const start = Date.now()
      const { api, controllers, waits } = await queue(10)
      controllers[3]!.abort()
      controllers[5]!.abort()
      await settle()
      const late = [api.wait('k'), api.wait('k')]
      await vi.advanceTimersByTimeAsync(1_200)
      const live = await Promise.all(waits.filter((_, i) => i !== 3 && i !== 5))
      const slots = [...live, ...(await Promise.all(late))].map((result) => result.at - start)
      const twice = slots.filter((at, i) => slots.indexOf(at) !== i)
      expect({ twice, late: slots.slice(-2) }).toEqual({ twice: [], late: [1_000, 1_100] })
    })

    it('30 waiting, 9 leaving, 9 more calls: never more than 10 starts in any second', async () => {
      const { api, controllers, waits } = await queue(30)
      const started: number[] = []
      for (const each of waits)
        each.then(
          () => started.push(Date.now()),
          () => {},
        )
      for (const i of [2, 5, 7, 11, 13, 17, 19, 23, 26]) controllers[i]!.abort()
      await settle()
      for (let i = 0; i < 9; i++) api.wait('k').then(() => started.push(Date.now()))
      await vi.advanceTimersByTimeAsync(4_000)
      expect(started).toHaveLength(30)
      const most = Math.max(
        ...started.map((end) => started.filter((at) => at > end - 1_000 && at <= end).length),
      )
      expect(most).toBe(10)
    })

    it('waiters leaving earliest first give every slot back: the next caller goes right after the first', async () => {
      const start = Date.now()
      const { api, controllers } = await queue(9)
      for (const controller of controllers.slice(1)) {
        controller.abort()
        await settle()
      }
      const next = api.wait('k')
      await vi.advanceTimersByTimeAsync(1_000)
      expect((await next).at - start).toBe(100)
    })
  })

  it('reservationHorizon bounds how far ahead any slot is reserved, whatever maxWait asks (default 1 m; issue 32)', async () => {
    const api = limiter()
    const waits = Array.from({ length: 61 }, () => api.wait('k', { maxWait: '10m' }))
    await settle()
    // Slots at 0 to 60 s: the last one exactly at the horizon.
    expect(api.waiting.size).toBe(60)
    let beyond: unknown
    api.wait('k', { maxWait: '10m' }).then(
      (result) => {
        beyond = result
      },
      (error: unknown) => {
        beyond = error
      },
    )
    await settle()
    expect(beyond).toBeInstanceOf(WaitExceededError)
    expect(beyond).toMatchObject({ retryAfter: 61_000, option: 'reservationHorizon' })
    expect(String(beyond)).toMatch(/`reservationHorizon` \(60000 ms\)/)
    const longer = limiter({ reservationHorizon: '2m' })
    const reserved = Array.from({ length: 62 }, () => longer.wait('k', { maxWait: '10m' }))
    await settle()
    expect(longer.waiting.size).toBe(61)
    await vi.advanceTimersByTimeAsync(61_000)
    await Promise.all([...waits, ...reserved])
  })

  it('reservationHorizon is checked at construction, naming the option', () => {
    for (const bad of [0, -1, 'soon', 2 ** 40])
      expect(() => limiter({ reservationHorizon: bad as never })).toThrow(/`reservationHorizon`/)
  })

  it('a signal aborted before the call rejects at once and charges nothing', async () => {
    const api = limiter()
    await expect(api.wait('k', { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' })
    expect((await api.peek('k')).remaining).toBe(1)
  })

  it('schedule runs the call at its slot and answers its value; a rejected wait never calls it', async () => {
    const api = limiter()
    const calls: number[] = []
    const call = () => {
      calls.push(Date.now())
      return 'ok'
    }
    const start = Date.now()
    const both = Promise.all([api.schedule('k', call), api.schedule('k', call)])
    await vi.advanceTimersByTimeAsync(1_000)
    expect(await both).toEqual(['ok', 'ok'])
    expect(calls).toEqual([start, start + 1_000])
    await expect(api.schedule('k', call, { maxWait: 0 })).rejects.toBeInstanceOf(WaitExceededError)
    expect(calls).toHaveLength(2)
  })

  it("a store failure refuses unless onStoreError: 'allow' is set, on the limiter or on the call (issue 32)", async () => {
    const failing: Store = {
      reservations: true,
      consume: () => Promise.reject(new Error('down')),
      peek: () => Promise.reject(new Error('down')),
      refund: () => {},
      reset: () => {},
    }
    const quiet = { store: failing, onError: () => {}, circuitBreaker: false as const }
    expect(await limiter({ ...quiet, onStoreError: 'allow' }).wait('k')).toMatchObject({
      allowed: true,
      source: 'policy',
    })
    await expect(limiter({ ...quiet, onStoreError: 'deny' }).wait('k')).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_STORE',
    })
    // Unset: a wait refuses, while limit() keeps the limiter's default ('allow').
    const unset = limiter(quiet)
    await expect(unset.wait('k')).rejects.toMatchObject({ code: 'ERR_RATEWINDOW_STORE' })
    await expect(unset.schedule('k', () => 'called')).rejects.toMatchObject({ code: 'ERR_RATEWINDOW_STORE' })
    expect(await unset.limit('k')).toMatchObject({ allowed: true, source: 'policy' })
    expect(await unset.wait('k', { onStoreError: 'allow' })).toMatchObject({
      allowed: true,
      source: 'policy',
    })
    await expect(unset.wait('k', { onStoreError: 'open' as never })).rejects.toMatchObject({
      option: 'onStoreError',
    })
  })

  it.each([
    ['fixed window', fixedWindow({ limit: 1, window: '1s' }), 'fixed-window'],
    ['sliding window counter', slidingWindowCounter({ limit: 1, window: '1s' }), 'sliding-window-counter'],
  ])('%s cannot reserve: wait rejects with a clear error recommending GCRA', async (_, rule, text) => {
    const api = new RateLimiter({ rules: rule })
    await expect(api.wait('k')).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      message: expect.stringContaining(text),
    })
    await expect(api.wait('k')).rejects.toThrow(/gcra\(\{ limit, window \}\)/)
  })

  it('a store that cannot reserve is refused with a clear error naming it (SyncedStore says why)', async () => {
    const inner = new MemoryStore()
    const plain = plainStore(inner)
    const refused = limiter({ store: plain }).wait('k')
    await expect(refused).rejects.toThrow(
      /the store \(Object\) cannot reserve slots .* Use RedisStore or MemoryStore/,
    )
    await expect(refused).rejects.not.toThrow(/SyncedStore/)
  })

  it('bad options are refused naming the option', async () => {
    const api = limiter()
    await expect(api.wait('k', { maxWait: -1 })).rejects.toMatchObject({ option: 'maxWait' })
    await expect(api.wait('k', { signal: 'x' as never })).rejects.toMatchObject({ option: 'signal' })
    await expect(api.wait('k', { max: 1 } as never)).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_UNKNOWN_OPTION',
    })
    await expect(api.schedule('k', 'x' as never)).rejects.toMatchObject({ option: 'fn' })
  })

  it('shadow mode reserves and reports the slot (outcome delayed) but never waits', async () => {
    const events: DecisionEvent[] = []
    const api = new RateLimiter({
      rules: tokenBucket({ capacity: 1, refillRate: 1, interval: '1s' }),
      shadow: true,
      observer: { onDecision: (event) => events.push(event) },
    })
    await api.wait('k')
    const result = await api.wait('k')
    expect(result).toMatchObject({ allowed: true, shadow: true, delay: 1_000 })
    expect(events.map((event) => event.outcome)).toEqual(['allowed', 'delayed'])
  })

  it('a slot answered late still goes at its time: the wait counts from the decision, never before the slot', async () => {
    const inner = new MemoryStore()
    let lag = 0
    // The store decides at once (its clock: Date.now) but its answer takes `lag` ms to arrive.
    const slow: Store = {
      reservations: true,
      consume: (request) => {
        const decision = inner.consume(request)
        // Answered at once: a fake timer nothing advances would hold the first wait until the store's real
        // timeout, and the failure policy would answer it instead of the store.
        if (lag === 0) return decision
        return new Promise((resolve) => setTimeout(() => resolve(decision), lag))
      },
      peek: (request) => inner.peek(request),
      refund: (request) => inner.refund(request),
      reset: (target) => inner.reset(target),
    }
    const api = limiter({ store: slow, timeout: '5s' })
    const start = Date.now()
    await api.wait('k')
    const second = api.wait('k') // answered at once: slot at 1000 ms
    lag = 300
    const third = api.wait('k') // decided now, slot at 2000 ms, answered 300 ms later
    const done = track([second, third])
    await vi.advanceTimersByTimeAsync(1_999)
    expect(done).toEqual([0])
    await vi.advanceTimersByTimeAsync(1)
    // At its slot, not 300 ms after it (the answer's lag plus the whole wait).
    expect(done).toEqual([0, 1])
    expect((await third).at).toBe(start + 2_000)
  })

  it('first come, first served even when an earlier answer came later than a later one: slots go in slot order', async () => {
    const inner = new MemoryStore()
    let lag = 0
    const slow: Store = {
      reservations: true,
      consume: (request) => {
        const decision = inner.consume(request)
        // Answered at once (no timer: nothing advances the fake ones before the first wait).
        if (lag === 0) return decision
        return new Promise((resolve) => setTimeout(() => resolve(decision), lag))
      },
      peek: (request) => inner.peek(request),
      refund: (request) => inner.refund(request),
      reset: (target) => inner.reset(target),
    }
    // 10 a second, no burst: slots 100 ms apart.
    const api = limiter({ rules: gcra({ limit: 10, window: '1s', burst: 1 }), store: slow, timeout: '5s' })
    await api.wait('k') // slot 0
    lag = 300
    // Decided now (slots 100 to 400 ms), answered 300 ms later.
    const early = [api.wait('k'), api.wait('k'), api.wait('k'), api.wait('k')]
    await vi.advanceTimersByTimeAsync(301)
    lag = 0
    // Decided at 301 ms (slot 500 ms), answered at once: after the four before it, whatever its answer's speed.
    const later = api.wait('k')
    const done = track([...early, later])
    await vi.advanceTimersByTimeAsync(199)
    expect(done).toEqual([0, 1, 2, 3, 4])
    const ats = await Promise.all([...early, later].map(async (each) => (await each).at))
    expect(ats).toEqual([...ats].sort((a, b) => a - b))
  })

  it('a slot already passed when its answer comes waits behind the earlier slots still queued (a late timer)', async () => {
    const inner = new MemoryStore()
    let hold: Promise<void> | undefined
    const held: Store = {
      reservations: true,
      consume: async (request) => {
        const decision = inner.consume(request)
        if (hold !== undefined) await hold
        return decision
      },
      peek: (request) => inner.peek(request),
      refund: (request) => inner.refund(request),
      reset: (target) => inner.reset(target),
    }
    const api = limiter({ store: held, timeout: '5s' })
    await api.wait('k') // slot 0
    const first = api.wait('k') // slot 1000 ms, queued
    await vi.advanceTimersByTimeAsync(0)
    let release = () => {}
    hold = new Promise((resolve) => {
      release = resolve
    })
    const second = api.wait('k') // slot 2000 ms, its answer held
    // The event loop is busy past both slots: the clocks move, no timer has fired yet.
    const steady = performance.now.bind(performance)
    const busy = vi.spyOn(performance, 'now').mockImplementation(() => steady() + 2_500)
    vi.setSystemTime(Date.now() + 2_500)
    const done = track([first, second])
    release()
    await vi.advanceTimersByTimeAsync(0)
    // Not before the slot queued ahead of it (it went at once, before the first, on today's main)...
    expect(done).toEqual([])
    // ...and with it when the timer fires: slot order.
    await vi.advanceTimersByTimeAsync(1_000)
    expect(done).toEqual([0, 1])
    busy.mockRestore()
  })

  it('the blocked-key cache answers only denials longer than the wait allowed: a shorter one asks the store', async () => {
    // The cache on the faked clock (its default clock is the process's monotonic one).
    const api = limiter({ blockedCache: { clock: () => Date.now() } })
    await api.wait('k')
    // Denied (its slot is 1 s away, beyond maxWait 0): the cache remembers the key for 1 s.
    await expect(api.wait('k', { maxWait: 0 })).rejects.toBeInstanceOf(WaitExceededError)
    // Within the cached denial's time, but allowed to wait for it: reserved, not refused from the cache.
    const waiting = api.wait('k', { maxWait: '2s' })
    await vi.advanceTimersByTimeAsync(1_000)
    expect((await waiting).delay).toBe(1_000)
    // A denial the cache holds longer than the wait allowed is still answered from it.
    await expect(api.wait('k', { maxWait: 0 })).rejects.toMatchObject({ result: { source: 'store' } })
    await expect(api.wait('k', { maxWait: 500 })).rejects.toMatchObject({ result: { source: 'cache' } })
  })

  it('reports the outcome delayed to observers for a request that waited', async () => {
    const events: DecisionEvent[] = []
    const api = limiter({ observer: { onDecision: (event) => events.push(event) } })
    await api.wait('k')
    const second = api.wait('k')
    await vi.advanceTimersByTimeAsync(1_000)
    await second
    expect(events.map((event) => event.outcome)).toEqual(['allowed', 'delayed'])
  })
})

describe('a wall clock that jumps while calls wait (issue 32)', () => {
  beforeEach(() => {
    vi.useRealTimers()
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'],
      now: 1_700_000_000_000,
    })
  })

  it('a forward jump of 1 s starts no call early: the store’s clock decides the slots, a steady one measures the waits', async () => {
    // The store keeps its own time, as Redis does (its TIME): here the steady clock, which the jump leaves alone.
    const storeNow = () => 1_700_000_000_000 + Math.floor(performance.now())
    const api = limiter({
      rules: gcra({ limit: 10, window: '1s', burst: 1 }),
      store: new MemoryStore({ clock: storeNow }),
    })
    const starts: number[] = []
    const early: number[] = []
    const waits = Array.from({ length: 40 }, () =>
      api.wait('k').then((result) => {
        starts.push(storeNow())
        if (storeNow() < result.at) early.push(result.at - storeNow())
      }),
    )
    await settle()
    // The process's wall clock jumps 1 s forward (NTP, a VM resumed) while 39 calls wait.
    vi.setSystemTime(Date.now() + 1_000)
    await vi.advanceTimersByTimeAsync(4_000)
    await Promise.all(waits)
    const most = Math.max(...starts.map((end) => starts.filter((at) => at > end - 1_000 && at <= end).length))
    expect({ early: early.length, most }).toEqual({ early: 0, most: 10 })
  })

  it('a forward jump of the store’s own clock (MemoryStore on Date.now) moves no call already waiting when a new call comes after it (attack round: 11 waiters went at once, 20 starts in one second)', async () => {
    const api = limiter({ rules: gcra({ limit: 10, window: '1s', burst: 1 }), store: new MemoryStore() })
    const starts: number[] = []
    const waits = Array.from({ length: 20 }, () =>
      api.wait('k').then(() => void starts.push(performance.now())),
    )
    await settle()
    await vi.advanceTimersByTimeAsync(500)
    // The wall clock, this store's clock, jumps 1 s forward; then one more call comes.
    vi.setSystemTime(Date.now() + 1_000)
    const late = api.wait('k').then(() => void starts.push(performance.now()))
    await vi.advanceTimersByTimeAsync(4_000)
    await Promise.all([...waits, late])
    const most = Math.max(...starts.map((end) => starts.filter((at) => at > end - 1_000 && at <= end).length))
    // The waiters keep their slots, 100 ms apart; the new call is the store's to place on its jumped clock.
    expect(most).toBeLessThanOrEqual(11)
  })
})
