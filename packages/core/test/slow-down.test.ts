/**
 * Issue 24: the engine every adapter's `slowDown()` shares, without HTTP: one timer for every delayed request,
 * options checked at construction with the toolkit's errors, bad callback values refused at request time.
 */
import { describe, expect, it } from 'vitest'
import { type FrameworkBinding, SlowDownEngine } from '../src/entries/adapter.js'
import { MemoryStore, type SlowDownOptions } from '../src/index.js'
import { DelayQueue, type DelayTimers } from '../src/time/delay-queue.js'

/** Timers the test drives: `advance` fires what is due. Counts the timers set. */
class Driven implements DelayTimers {
  time = 0
  set = 0
  cleared = 0
  readonly #pending = new Map<number, { at: number; callback: () => void }>()
  #id = 0
  now = () => this.time
  setTimeout = (callback: () => void, ms: number) => {
    this.set++
    this.#pending.set(++this.#id, { at: this.time + ms, callback })
    return this.#id
  }
  clearTimeout = (id: unknown) => {
    if (this.#pending.delete(id as number)) this.cleared++
  }
  get pending() {
    return this.#pending.size
  }
  advance(ms: number) {
    this.time += ms
    for (const [id, timer] of [...this.#pending]) {
      if (timer.at <= this.time) {
        this.#pending.delete(id)
        timer.callback()
      }
    }
  }
}

describe('DelayQueue: one timer for every delayed request', () => {
  it('runs each entry at its time, in time order, with at most one timer pending', () => {
    const timers = new Driven()
    const queue = new DelayQueue(timers)
    const ran: string[] = []
    for (const [name, ms] of [
      ['c', 300],
      ['a', 100],
      ['b', 200],
      ['a2', 100],
      ['d', 400],
    ] as const)
      queue.add(ms, () => ran.push(name))
    expect(timers.pending).toBe(1)
    timers.advance(99)
    expect(ran).toEqual([])
    timers.advance(1)
    expect(ran).toEqual(['a', 'a2'])
    expect(timers.pending).toBe(1)
    timers.advance(300)
    expect(ran).toEqual(['a', 'a2', 'b', 'c', 'd'])
    expect([queue.size, timers.pending]).toEqual([0, 0])
  })

  it('a cancelled entry never runs; the last one cancelled clears the timer', () => {
    const timers = new Driven()
    const queue = new DelayQueue(timers)
    const ran: number[] = []
    const entries = [100, 200, 300].map((ms) => queue.add(ms, () => ran.push(ms)))
    expect(queue.cancel(entries[0]!)).toBe(true)
    expect(queue.cancel(entries[0]!)).toBe(false)
    timers.advance(250)
    expect(ran).toEqual([200])
    expect(queue.cancel(entries[1]!)).toBe(false)
    expect(queue.cancel(entries[2]!)).toBe(true)
    expect([queue.size, timers.pending]).toEqual([0, 0])
    timers.advance(1_000)
    expect(ran).toEqual([200])
  })

  it('runs each entry when its timer fires, even on a clock that stands still (a test faking Date only)', () => {
    const timers = new Driven()
    timers.now = () => 1_000 // stopped
    const queue = new DelayQueue(timers)
    const ran: string[] = []
    queue.add(100, () => ran.push('a'))
    queue.add(250, () => ran.push('b'))
    timers.advance(100)
    expect(ran).toEqual(['a'])
    timers.advance(149)
    expect(ran).toEqual(['a'])
    timers.advance(1)
    expect(ran).toEqual(['a', 'b'])
    // A later request waits its own delay from now, not from the stopped clock's reading.
    queue.add(50, () => ran.push('c'))
    timers.advance(49)
    expect(ran).toEqual(['a', 'b'])
    timers.advance(1)
    expect(ran).toEqual(['a', 'b', 'c'])
  })

  it('keeps 10,000 entries of random delays on one timer and runs them in order', () => {
    const timers = new Driven()
    const queue = new DelayQueue(timers)
    const ran: number[] = []
    let seed = 7
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
      return seed % 5_000
    }
    const cancelled = new Set<number>()
    const entries = Array.from({ length: 10_000 }, (_, i) => {
      const ms = random()
      return { i, ms, entry: queue.add(ms, () => ran.push(ms)) }
    })
    for (const { i, entry } of entries) if (i % 3 === 0 && queue.cancel(entry)) cancelled.add(i)
    expect(timers.pending).toBe(1)
    for (let t = 0; t < 5_000; t += 7) timers.advance(7)
    const expected = entries.filter(({ i }) => !cancelled.has(i)).map(({ ms }) => ms)
    expect(ran).toHaveLength(expected.length)
    expect(ran).toEqual([...expected].sort((a, b) => a - b))
    expect(timers.set).toBeLessThan(5_000 / 7 + 2)
  })
})

interface Req {
  ip: string
}
const binding: FrameworkBinding<Req> = {
  name: 'Test',
  clientIp: (request) => request.ip,
  untrustedForwardedFor: () => false,
  trustProxyHint: '',
}
const engine = (options: SlowDownOptions<[Req]>) => new SlowDownEngine<Req, [Req]>(options, binding)

describe('slowDown options', () => {
  it.each([
    [{ max: 5 }, 'max', 'refuses no request for its count'],
    [{ limit: 5 }, 'limit', 'delayAfter'],
    [{ headers: true }, 'headers', 'no RateLimit headers'],
    [{ standardHeaders: 'draft-7' }, 'standardHeaders', 'no RateLimit headers'],
    [{ handler: () => {} }, 'handler', 'so it has no `handler`'],
    [{ window: '1m' }, 'window', '`windowMs`'],
    [{ identifier: 'api' }, 'identifier', '`name` names it'],
    [{ delayAftr: 1 }, 'delayAftr', 'Did you mean `delayAfter`?'],
    [{ onLimitReached: () => {} }, 'onLimitReached', 'express-slow-down 2 dropped `onLimitReached`'],
    [{ draft_polli_ratelimit_headers: true }, 'draft_polli_ratelimit_headers', 'no RateLimit headers'],
    [{ requestPropertyName: 'speed' }, 'requestPropertyName', "`c.get('slowDown')` (Hono)"],
  ])('refuses %j, naming the option and what to do', (options, option, text) => {
    const build = () => engine(options as never)
    expect(build).toThrow(expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option }))
    expect(build).toThrow(text)
    // Never rateLimit()'s advice (`handler`, `headers`, `req.rateLimit`): slowDown() has none of them.
    expect(build).not.toThrow(/use `handler`|use `headers|req\.rateLimit/)
  })

  it("takes the adapter's own option (Express's requestPropertyName) that it refuses elsewhere", () => {
    const build = () =>
      new SlowDownEngine<Req, [Req]>({ requestPropertyName: 'speed' } as never, binding, [
        'requestPropertyName',
      ])
    expect(build).not.toThrow()
  })

  it.each([
    [{ windowMs: 0 }, 'windowMs', 'a whole number of ms from 1'],
    [{ windowMs: '15m' }, 'windowMs', 'received "15m"'],
    [{ delayAfter: -1 }, 'delayAfter', 'a whole number >= 0'],
    [{ delayAfter: 1.5 }, 'delayAfter', 'a whole number >= 0'],
    [{ delayMs: -5 }, 'delayMs', 'a number of ms >= 0'],
    [{ delayMs: '100' }, 'delayMs', 'received "100"'],
    [{ maxDelayMs: Number.NaN }, 'maxDelayMs', 'received NaN'],
    [{ keyGenerator: 'ip' }, 'keyGenerator', 'a function'],
    [{ skipFailedRequests: 'yes' }, 'skipFailedRequests', 'true or false'],
    [{ validate: 'no' }, 'validate', 'true, false or an object'],
    [{ timers: {} }, 'timers', 'now, setTimeout and clearTimeout'],
    [{ store: { increment() {}, resetKey() {} } }, 'store', 'a store for express-rate-limit'],
  ])('refuses the bad value in %j, naming it', (options, option, text) => {
    const build = () => engine(options as never)
    expect(build).toThrow(expect.objectContaining({ option }))
    expect(build).toThrow(text)
  })

  it("accepts express-slow-down's validate and passOnStoreError, so a configuration moves unchanged", () => {
    expect(() => engine({ validate: { delayMs: false }, passOnStoreError: true })).not.toThrow()
    expect(() => engine({ validate: false, maxDelayMs: Number.POSITIVE_INFINITY })).not.toThrow()
  })

  it('refuses a bad value a callback returns, at request time, as an error the adapter passes on', async () => {
    const store = new MemoryStore()
    const bad = engine({ store, delayAfter: 0, delayMs: () => Number.NaN })
    await expect(
      Promise.resolve().then(() => bad.decide({ ip: '192.0.2.1' }, [{ ip: '192.0.2.1' }])),
    ).rejects.toThrow(/`delayMs` must be a number of ms >= 0 \(returned by `delayMs`\); received NaN/)
    const endless = engine({ store, prefix: 'e', delayAfter: 0, delayMs: () => Number.POSITIVE_INFINITY })
    await expect(
      Promise.resolve().then(() => endless.decide({ ip: '192.0.2.1' }, [{ ip: '192.0.2.1' }])),
    ).rejects.toThrow(/finite/)
    const after = engine({ store, prefix: 'a', delayAfter: async () => -1 })
    await expect(after.decide({ ip: '192.0.2.1' }, [{ ip: '192.0.2.1' }])).rejects.toThrow(
      /returned by `delayAfter`/,
    )
  })

  it.each([
    ['undefined', () => undefined, 'received undefined'],
    ['a number', () => 42, 'received 42'],
    ['a promise of null', async () => null, 'received null'],
  ])('a keyGenerator that returns %s is an error naming keyGenerator', async (_, keyGenerator, text) => {
    const bad = engine({ keyGenerator: keyGenerator as never })
    const decided = Promise.resolve().then(() => bad.decide({ ip: '192.0.2.1' }, [{ ip: '192.0.2.1' }]))
    await expect(decided).rejects.toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_KEY', option: 'keyGenerator' }),
    )
    await expect(decided).rejects.toThrow(`\`keyGenerator\` must return a string; ${text}`)
  })

  it('two slowDown() on one store with one windowMs: the warning advises a `prefix` each, not `group` (slowDown() has none)', async () => {
    const warnings: string[] = []
    const listen = (warning: Error) => void warnings.push(warning.message)
    process.on('warning', listen)
    try {
      const store = new MemoryStore()
      const first = engine({ store, delayAfter: 5 })
      engine({ store, delayAfter: 1 })
      await first.decide({ ip: '192.0.2.1' }, [{ ip: '192.0.2.1' }])
      await new Promise((resolve) => setImmediate(resolve))
      const superseded = warnings.filter((message) => message.includes('was superseded'))
      expect(superseded).toHaveLength(1)
      expect(superseded[0]).toContain('give each slowDown() its own `prefix`')
      expect(superseded[0]).not.toContain('`group`')
    } finally {
      process.off('warning', listen)
    }
  })

  it('a negative delay from delayMs counts as none, as in express-slow-down', async () => {
    const decided = await engine({ delayAfter: 0, delayMs: () => -50 }).decide({ ip: '192.0.2.1' }, [
      { ip: '192.0.2.1' },
    ])
    expect(decided?.info).toMatchObject({ used: 1, limit: 0, remaining: 0, delay: 0 })
  })

  it('a store that fails lets the request go without delay, reports it, and counts as failed-open', async () => {
    const failing = new MemoryStore()
    failing.consume = () => {
      throw new Error('down')
    }
    const errors: unknown[] = []
    const outcomes: string[] = []
    const decided = await engine({
      store: failing,
      delayAfter: 0,
      delayMs: 1_000,
      onError: (error) => void errors.push(error),
      observer: { onDecision: (event) => void outcomes.push(event.outcome) },
    }).decide({ ip: '192.0.2.1' }, [{ ip: '192.0.2.1' }])
    expect(decided?.info).toMatchObject({ used: 0, delay: 0, resetTime: undefined })
    expect(errors).toHaveLength(1)
    expect(outcomes).toEqual(['failed-open'])
  })
})

/** A response that never finishes, for `proceed`. */
const response = { statusCode: 200, writableFinished: false, once: () => undefined }

/** A binding whose clients the test disconnects: `leave(request)` runs the request's `onClose` listeners. */
function leavingBinding() {
  const listeners = new Map<Req, Set<() => void>>()
  const leaving: FrameworkBinding<Req> = {
    ...binding,
    onClose: (request, listener) => {
      const own = listeners.get(request) ?? new Set()
      listeners.set(request, own.add(listener))
      return () => void own.delete(listener)
    },
  }
  const leave = (request: Req) => {
    for (const listener of listeners.get(request) ?? []) listener()
  }
  const listening = () => [...listeners.values()].reduce((sum, each) => sum + each.size, 0)
  return { binding: leaving, leave, listening }
}

describe('slowDown bounds on delayed requests (issue 32, item 8)', () => {
  /** Decides for `request` and proceeds; what became of it. */
  async function send(
    slow: SlowDownEngine<Req, [Req]>,
    request: Req,
    ran: Req[] = [],
  ): Promise<{ refused: boolean; decided: Awaited<ReturnType<typeof slow.decide>> }> {
    const decided = await slow.decide(request, [request])
    if (decided?.refusal !== undefined) return { refused: true, decided }
    if (decided !== undefined) slow.proceed(decided, [request], response, () => void ran.push(request))
    return { refused: false, decided }
  }

  it('refuses the 11th delayed request of one key by default: 429, Retry-After the delay it would have waited, the default body, outcome shed', async () => {
    const timers = new Driven()
    const outcomes: string[] = []
    const slow = engine({
      delayAfter: 0,
      delayMs: 2_500,
      timers,
      observer: { onDecision: (event) => void outcomes.push(event.outcome) },
    })
    const client = { ip: '192.0.2.1' }
    const answers = []
    for (let i = 0; i < 11; i++) answers.push(await send(slow, client))
    expect(answers.map((each) => each.refused)).toEqual([...Array(10).fill(false), true])
    expect(outcomes).toEqual([...Array(10).fill('delayed'), 'shed'])
    expect(answers[10]!.decided?.refusal).toEqual({
      statusCode: 429,
      headers: { 'Retry-After': '3' },
      contentType: 'application/json; charset=utf-8',
      payload: JSON.stringify({
        error: 'Too Many Requests',
        message: 'Too many requests: retry in 3 seconds.',
        retryAfter: 3,
      }),
    })
    expect(answers[10]!.decided?.info).toMatchObject({ used: 11, delay: 2_500 })
    // Another client is not refused for this one.
    expect((await send(slow, { ip: '192.0.2.2' })).refused).toBe(false)
    expect(slow.waiting).toBe(11)
  })

  it('refuses the 1001st delayed request of the middleware by default, whatever its key; a place comes free when a delay ends', async () => {
    const timers = new Driven()
    const slow = engine({ delayAfter: 0, delayMs: 1_000, timers })
    const refused: number[] = []
    for (let i = 0; i < 1_001; i++) {
      if ((await send(slow, { ip: `10.0.${i >> 8}.${i & 255}` })).refused) refused.push(i)
    }
    expect(refused).toEqual([1_000])
    expect(slow.waiting).toBe(1_000)
    timers.advance(1_000)
    expect(slow.waiting).toBe(0)
    expect((await send(slow, { ip: '10.9.9.9' })).refused).toBe(false)
  })

  it('maxPerKey and maxWaiting: false take the bounds off (express-slow-down: every request waits)', async () => {
    const timers = new Driven()
    const slow = engine({ delayAfter: 0, delayMs: 1_000, timers, maxPerKey: false, maxWaiting: false })
    const client = { ip: '192.0.2.1' }
    let refused = 0
    for (let i = 0; i < 2_000; i++) if ((await send(slow, client)).refused) refused++
    expect([refused, slow.waiting]).toEqual([0, 2_000])
    timers.advance(1_000)
    expect(slow.waiting).toBe(0)
  })

  it('own numbers: maxPerKey 2 and maxWaiting 3', async () => {
    const slow = engine({ delayAfter: 0, delayMs: 1_000, timers: new Driven(), maxPerKey: 2, maxWaiting: 3 })
    const refused = []
    for (const ip of ['a', 'a', 'a', 'b', 'c', 'd'])
      refused.push((await send(slow, { ip: `::${ip}` })).refused)
    expect(refused).toEqual([false, false, true, false, true, true])
  })

  it('a request without delay takes no place: the bounds count delayed requests only', async () => {
    const slow = engine({ delayAfter: 5, delayMs: 1_000, timers: new Driven(), maxPerKey: 1 })
    const refused = []
    for (let i = 0; i < 7; i++) refused.push((await send(slow, { ip: '192.0.2.1' })).refused)
    expect(refused).toEqual([false, false, false, false, false, false, true])
  })

  it('a client that leaves while delayed gives its place back, and its handler never runs', async () => {
    const timers = new Driven()
    const { binding: leaving, leave, listening } = leavingBinding()
    const slow = new SlowDownEngine<Req, [Req]>(
      { delayAfter: 0, delayMs: 1_000, timers, maxPerKey: 1 },
      leaving,
    )
    const gone = { ip: '192.0.2.1' }
    const ran: Req[] = []
    let abandoned = 0
    const decided = await slow.decide(gone, [gone])
    slow.proceed(
      decided!,
      [gone],
      response,
      () => void ran.push(gone),
      () => void abandoned++,
    )
    expect((await send(slow, { ip: '192.0.2.1' })).refused).toBe(true)
    leave(gone)
    expect([slow.waiting, abandoned, timers.pending, listening()]).toEqual([0, 1, 0, 0])
    const next = { ip: '192.0.2.1' }
    expect((await send(slow, next, ran)).refused).toBe(false)
    timers.advance(1_000)
    // The next request ran; the one whose client left never did.
    expect(ran).toEqual([next])
    expect([slow.waiting, listening()]).toEqual([0, 0])
  })

  it.each([
    [{ maxPerKey: 0 }, 'maxPerKey'],
    [{ maxPerKey: -1 }, 'maxPerKey'],
    [{ maxPerKey: 1.5 }, 'maxPerKey'],
    [{ maxPerKey: '10' }, 'maxPerKey'],
    [{ maxPerKey: true }, 'maxPerKey'],
    [{ maxWaiting: Number.POSITIVE_INFINITY }, 'maxWaiting'],
    [{ maxWaiting: null }, 'maxWaiting'],
  ])('refuses %j at construction, naming the option and how to switch the bound off', (options, option) => {
    const build = () => engine(options as never)
    expect(build).toThrow(expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option }))
    expect(build).toThrow(`\`${option}\` must be a positive whole number`)
    expect(build).toThrow('or false for no bound')
  })
})
