import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { HttpRateLimiter } from '../src/entries/adapter.js'
import {
  ConcurrencyLimiter,
  fixedWindow,
  MemoryStore,
  RateLimitError,
  RateLimiter,
  SyncedStore,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '../src/index.js'
import { type Duration, parseDuration } from '../src/support/duration.js'

function errorOf(fn: () => unknown): RateLimitError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitError)
    return error as RateLimitError
  }
  throw new Error('expected a RateLimitError')
}

describe('every options object refuses unknown names the same way (issue 20)', () => {
  it.each([
    [
      'SyncedStore',
      () => new SyncedStore({ client: {} as never, intervl: '1s' } as never),
      'intervl',
      /`interval`/,
    ],
    [
      'ConcurrencyLimiter',
      () => new ConcurrencyLimiter({ limit: 2, leas: '1m' } as never),
      'leas',
      /`lease`/,
    ],
    [
      'penalty',
      () =>
        new RateLimiter({
          rules: fixedWindow({ limit: 1, window: '1m' }),
          penalty: { after: 3, within: '1m', block: '15m', blockFor: '1h' } as never,
        }),
      'blockFor',
      /`penalty` options/,
    ],
  ])('%s', (_, construct, option, hint) => {
    const error = errorOf(construct)
    expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION', option })
    expect(error.message).toMatch(hint)
  })
})

describe('a store from another library', () => {
  const rule = fixedWindow({ limit: 1, window: '1m' })
  it.each([
    [
      'an express-rate-limit store',
      { increment: () => {}, decrement: () => {}, resetKey: () => {} },
      /a store for express-rate-limit/,
    ],
    ['a @fastify/rate-limit store', { incr: () => {}, child: () => {} }, /a store for @fastify\/rate-limit/],
    [
      'a rate-limiter-flexible limiter',
      { consume: () => {}, block: () => {}, penalty: () => {} },
      /rate-limiter-flexible/,
    ],
    ["koa-ratelimit's memory db", new Map(), /koa-ratelimit/],
  ])('%s as store or fallback is named, with what to use', (_, store, from) => {
    for (const option of ['store', 'fallback'] as const) {
      const error = errorOf(() => new RateLimiter({ rules: rule, [option]: store as never }))
      expect(error.option).toBe(option)
      expect(error.message).toMatch(from)
      expect(error.message).toMatch(/new RedisStore\(\{ client \}\).*new MemoryStore\(\)/)
    }
  })
})

describe('durations', () => {
  it('parses every spelling the Duration type accepts (types and runtime agree)', () => {
    const spellings: Duration[] = [500, '500ms', '1.5s', '30 s', '1 minute', '15 minutes', '2h', '1 day']
    for (const spelling of spellings) expect(parseDuration(spelling, 'window')).toBeGreaterThan(0)
  })

  it.each([
    [500, 500],
    ['500ms', 500],
    ['30s', 30_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    ['1.5s', 1_500],
    ['30 s', 30_000],
    ['1 minute', 60_000],
    ['15 minutes', 900_000],
    ['1 hour', 3_600_000],
    ['2 days', 172_800_000],
    ['250 milliseconds', 250],
    ['1e3ms', 1_000],
    ['10', 10],
    ['60000', 60_000],
  ])('%s is %d ms', (input, ms) => {
    expect(parseDuration(input, 'window')).toBe(ms)
  })

  it.each([
    '1x',
    '',
    '1.5ms',
    '-1s',
    0,
    -5,
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    null,
    '1  minute',
    'Infinity s',
    '1 Minute',
  ])('rejects %s naming the option and the value', (input) => {
    const error = errorOf(() => fixedWindow({ limit: 1, window: input as never }))
    expect(error.code).toBe('ERR_RATEWINDOW_INVALID_WINDOW')
    expect(error.option).toBe('window')
    expect(error.message).toContain('`window`')
    expect(error.message).toContain('received')
    expect(error.message).toContain("'30s'")
  })
})

describe('rule options', () => {
  it.each([-1, 0, 1.5, Number.NaN, '100', undefined, Number.MAX_SAFE_INTEGER + 1])(
    'limit %s is rejected',
    (limit) => {
      const error = errorOf(() => slidingWindowCounter({ limit: limit as never, window: '1m' }))
      expect(error.code).toBe('ERR_RATEWINDOW_INVALID_LIMIT')
      expect(error.message).toMatch(/^`limit` must be a positive whole number/)
    },
  )

  it('names the received value in the message', () => {
    expect(errorOf(() => fixedWindow({ limit: -1, window: '1m' })).message).toContain('received -1')
    expect(errorOf(() => fixedWindow({ limit: 1, window: '1x' as Duration })).message).toContain(
      'received "1x"',
    )
  })

  it('rejects products that would not stay exact', () => {
    const error = errorOf(() => slidingWindowLog({ limit: 2 ** 30, window: '1d' }))
    expect(error.code).toBe('ERR_RATEWINDOW_INVALID_OPTION')
    expect(error.message).toContain('`limit` × `window`')
  })

  it('validates token bucket options by name', () => {
    expect(errorOf(() => tokenBucket({ capacity: 0, refillRate: 1 })).option).toBe('capacity')
    expect(errorOf(() => tokenBucket({ capacity: 1, refillRate: 0.5 })).option).toBe('refillRate')
    expect(errorOf(() => tokenBucket({ capacity: 1, refillRate: 1, interval: '1y' as never })).option).toBe(
      'interval',
    )
  })

  it('rejects a policy name that would break a structured header', () => {
    expect(errorOf(() => fixedWindow({ limit: 1, window: 1, name: 'a"b' })).option).toBe('name')
  })
})

describe('RateLimiter options', () => {
  const rule = slidingWindowCounter({ limit: 10, window: '1m' })

  it('rejects missing, empty and foreign rules', () => {
    expect(errorOf(() => new RateLimiter({ rules: [] })).option).toBe('rules')
    expect(errorOf(() => new RateLimiter({ rules: [rule, { limit: 5 } as never] })).option).toBe('rules[1]')
    expect(errorOf(() => new RateLimiter(undefined as never)).option).toBe('options')
  })

  it('rejects two rules that would share storage', () => {
    const error = errorOf(
      () => new RateLimiter({ rules: [rule, slidingWindowCounter({ limit: 5, window: 60_000 })] }),
    )
    expect(error.code).toBe('ERR_RATEWINDOW_DUPLICATE_RULE')
  })

  it('rejects a cost that no rule could ever admit, and a fractional or negative cost', async () => {
    const limiter = new RateLimiter({ rules: [rule, fixedWindow({ limit: 3, window: '1s' })] })
    await expect(limiter.limit('k', { cost: 4 })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
    })
    await expect(limiter.limit('k', { cost: 1.5 })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_COST',
    })
    await expect(limiter.limit('k', { cost: -1 })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_COST',
    })
    expect((await limiter.limit('k', { cost: 3 })).allowed).toBe(true)
  })

  it('caps the cost of one request under a sliding window log at 1,000 (its work grows with the cost)', async () => {
    const log = slidingWindowLog({ limit: 100_000, window: '1h' })
    expect(log.maxCost).toBe(1_000)
    const limiter = new RateLimiter({ rules: log })
    expect(limiter.maxCost).toBe(1_000)
    await expect(limiter.limit('k', { cost: 100_000 })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT',
      message: expect.stringContaining('at most 1000 for a sliding window log'),
    })
    expect(await limiter.limit('k', { cost: 1_000 })).toMatchObject({ allowed: true, remaining: 99_000 })
    expect(new RateLimiter({ rules: slidingWindowCounter({ limit: 100_000, window: '1h' }) }).maxCost).toBe(
      100_000,
    )
  })

  it('refuses objects that merely look like rules, and copies of rules', () => {
    const real = fixedWindow({ limit: 5, window: '1m' })
    const lookalike = { ...real }
    const forged = JSON.parse(JSON.stringify(real))
    const handmade = Object.create(null, Object.getOwnPropertyDescriptors(real))
    for (const fake of [lookalike, forged, { id: 'fw60000', logic: real.logic, script: real.script }]) {
      const error = errorOf(() => new RateLimiter({ rules: fake }))
      expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'rules' })
      expect(errorOf(() => new RateLimiter({ rules: [real, fake] })).option).toBe('rules[1]')
    }
    // The brand is a registered symbol, so a rule made by another copy of the package (its ESM and CommonJS
    // builds) is accepted: simulated here by copying every property descriptor, the symbol's too.
    expect(() => new RateLimiter({ rules: handmade })).not.toThrow()
    expect(() => new RateLimiter({ rules: real })).not.toThrow()
  })

  it('rejects a middleware cost larger than every limit, at construction', () => {
    const binding = {
      name: 't',
      clientIp: () => '127.0.0.1',
      untrustedForwardedFor: () => false,
      trustProxyHint: '',
    }
    expect(() => new HttpRateLimiter({ limit: 5, cost: 6 }, binding)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT', option: 'cost' }),
    )
    expect(() => new HttpRateLimiter({ limit: 5, cost: 5 }, binding)).not.toThrow()
  })

  it('rejects a `concurrency.releaseOnClose` that is not a boolean, naming it', () => {
    const binding = {
      name: 't',
      clientIp: () => '127.0.0.1',
      untrustedForwardedFor: () => false,
      trustProxyHint: '',
    }
    const error = errorOf(
      () => new HttpRateLimiter({ concurrency: { limit: 2, releaseOnClose: 'yes' as never } }, binding),
    )
    expect(error).toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      option: 'concurrency.releaseOnClose',
    })
    expect(error.message).toContain('"yes"')
    expect(
      () => new HttpRateLimiter({ concurrency: { limit: 2, releaseOnClose: true } }, binding),
    ).not.toThrow()
  })

  it('rejects a key that is not a string', async () => {
    const limiter = new RateLimiter({ rules: rule })
    await expect(limiter.limit(42 as never)).rejects.toMatchObject({ code: 'ERR_RATEWINDOW_INVALID_KEY' })
  })

  it('rejects a prefix with braces (they would break the Redis hash tag)', () => {
    expect(errorOf(() => new RateLimiter({ rules: rule, prefix: 'a{b' })).option).toBe('prefix')
  })

  it('rejects bad failure-policy options by name', () => {
    const rules = slidingWindowCounter({ limit: 10, window: '1m' })
    expect(errorOf(() => new RateLimiter({ rules, onStoreError: 'maybe' as never })).option).toBe(
      'onStoreError',
    )
    expect(errorOf(() => new RateLimiter({ rules, onShed: 'allow' as never })).option).toBe('onShed')
    expect(errorOf(() => new RateLimiter({ rules, timeout: '0s' as never })).option).toBe('timeout')
    expect(errorOf(() => new RateLimiter({ rules, circuitBreaker: { failures: 0 } })).option).toBe(
      'circuitBreaker.failures',
    )
    expect(
      errorOf(() => new RateLimiter({ rules, circuitBreaker: { cooldown: '1x' as never } })).option,
    ).toBe('circuitBreaker.cooldown')
    expect(errorOf(() => new RateLimiter({ rules, circuitBreaker: 5 as never })).option).toBe(
      'circuitBreaker',
    )
    expect(errorOf(() => new RateLimiter({ rules, blockedCache: { maxKeys: -1 } })).option).toBe(
      'blockedCache.maxKeys',
    )
    expect(errorOf(() => new RateLimiter({ rules, fallback: {} as never })).option).toBe('fallback')
    expect(errorOf(() => new RateLimiter({ rules, onError: 'log' as never })).option).toBe('onError')
  })

  it('rejects bad MemoryStore options', () => {
    expect(errorOf(() => new MemoryStore({ maxKeys: 0 })).option).toBe('maxKeys')
    expect(errorOf(() => new MemoryStore({ clock: 5 as never })).option).toBe('clock')
  })

  it('any rule options either build a rule or throw a RateLimitError with a code', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (limit, window) => {
        try {
          const built = slidingWindowCounter({ limit, window } as never)
          expect(built.limit).toBeGreaterThan(0)
        } catch (error) {
          expect(error).toBeInstanceOf(RateLimitError)
          expect((error as RateLimitError).code).toMatch(/^ERR_RATEWINDOW_/)
        }
      }),
      { numRuns: 500 },
    )
  })
})
