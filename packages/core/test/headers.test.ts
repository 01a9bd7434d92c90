import fc from 'fast-check'
import { type BareItem, type Item, parseDictionary, parseList } from 'structured-headers'
import { describe, expect, it } from 'vitest'
import { headerReset, partitionKey } from '../src/entries/adapter.js'
import {
  fixedWindow,
  gcra,
  type HeaderFormat,
  MemoryStore,
  quota,
  RateLimiter,
  type RateLimitResult,
  type Rule,
  rateLimitHeaders,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '../src/index.js'

async function resultAfter(waitMs: number, allowed: boolean): Promise<RateLimitResult> {
  // A real decision, then the reset and retry fields set to the case under test.
  let now = 0
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 100, window: '1m' }),
    store: new MemoryStore({ clock: () => now }),
  })
  now = 1_000
  const result = await limiter.limit('k')
  return { ...result, allowed, remaining: allowed ? 99 : 0, reset: waitMs, retryAfter: allowed ? 0 : waitMs }
}

const HOUR = 472_222 * 3_600_000 // the start of an hour

/** A limiter of `burst` (2 per second, sliding window counter) and `hourly` (1000 per hour, fixed window). */
function burstAndHourly(format?: HeaderFormat) {
  const clock = { now: HOUR }
  const limiter = new RateLimiter({
    rules: [
      slidingWindowCounter({ limit: 2, window: '1s', name: 'burst' }),
      fixedWindow({ limit: 1000, window: '1h', name: 'hourly' }),
    ],
    store: new MemoryStore({ clock: () => clock.now }),
  })
  const headers = async (cost = 1) => rateLimitHeaders(await limiter.limit('k', { cost }), { format })
  return { clock, headers }
}

/** One parsed `RateLimit` or `RateLimit-Policy` member, read with an independent RFC 9651 parser. */
interface Member {
  name: BareItem
  params: Record<string, BareItem>
}

function members(field: string | undefined): Member[] {
  expect(field).toBeDefined()
  return parseList(field!).map((member) => {
    const [name, params] = member as Item
    return { name, params: Object.fromEntries(params) }
  })
}

describe('draft-6 (default)', () => {
  it('writes policy, limit, remaining and reset', async () => {
    expect(rateLimitHeaders(await resultAfter(12_000, true))).toEqual({
      'RateLimit-Policy': '100;w=60',
      'RateLimit-Limit': '100',
      'RateLimit-Remaining': '99',
      'RateLimit-Reset': '12',
    })
  })

  it('on a denial adds Retry-After, equal to the reset value', async () => {
    expect(rateLimitHeaders(await resultAfter(12_000, false))).toEqual({
      'RateLimit-Policy': '100;w=60',
      'RateLimit-Limit': '100',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '12',
      'Retry-After': '12',
    })
  })

  it.each([
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [1, '1'],
  ])('rounds %d ms up to %s s (never 0 while blocked)', async (ms, seconds) => {
    const headers = rateLimitHeaders(await resultAfter(ms, false))
    expect(headers['Retry-After']).toBe(seconds)
    expect(headers['RateLimit-Reset']).toBe(seconds)
  })

  it('reports the rule that blocks longest, and lists every policy', async () => {
    const { clock, headers } = burstAndHourly()
    await headers()
    expect(await headers()).toEqual({
      'RateLimit-Policy': '2;w=1, 1000;w=3600',
      'RateLimit-Limit': '2',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '2',
    })
    clock.now += 500
    expect(await headers()).toEqual({
      'RateLimit-Policy': '2;w=1, 1000;w=3600',
      'RateLimit-Limit': '2',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '1',
      'Retry-After': '1',
    })
  })

  it('Regression: two rules with the same limit gave a policy list with a repeated value', async () => {
    // Drafts -06/-07 forbid `10;w=1, 10;w=60`: two policies may not share a quota.
    const limiter = new RateLimiter({
      rules: [
        tokenBucket({ capacity: 10, refillRate: 10, interval: '1s' }),
        fixedWindow({ limit: 10, window: '1m' }),
        slidingWindowLog({ limit: 10, window: '1m', name: 'log' }),
        fixedWindow({ limit: 50, window: '1h' }),
      ],
    })
    const result = await limiter.limit('k')
    expect(rateLimitHeaders(result)['RateLimit-Policy']).toBe('10;w=60, 50;w=3600')
    expect(rateLimitHeaders(result, { format: 'draft-7' })['RateLimit-Policy']).toBe('10;w=60, 50;w=3600')
    const items = members(rateLimitHeaders(result)['RateLimit-Policy']).map(({ name }) => name)
    expect(new Set(items).size).toBe(items.length)
  })
})

describe('draft-7', () => {
  it('writes one RateLimit field, a structured dictionary', async () => {
    const headers = rateLimitHeaders(await resultAfter(12_000, false), { format: 'draft-7' })
    expect(headers).toEqual({
      'RateLimit-Policy': '100;w=60',
      RateLimit: 'limit=100, remaining=0, reset=12',
      'Retry-After': '12',
    })
    const fields = Object.fromEntries(
      [...parseDictionary(headers.RateLimit!)].map(([key, [value]]) => [key, value]),
    )
    expect(fields).toEqual({ limit: 100, remaining: 0, reset: 12 })
    expect(members(headers['RateLimit-Policy'])).toEqual([{ name: 100, params: { w: 60 } }])
  })
})

describe.each(['draft-8', 'draft-11'] as const)('%s: named policies', (format) => {
  it('writes one policy and its service limit', async () => {
    const headers = rateLimitHeaders(await resultAfter(12_000, true), { format })
    // Per-rule values come from the rule itself: 59 s left of the minute that began at 0.
    expect(headers).toEqual({
      'RateLimit-Policy': '"100-per-1m";q=100;w=60',
      RateLimit: '"100-per-1m";r=99;t=59',
    })
    expect(members(headers.RateLimit)).toEqual([{ name: '100-per-1m', params: { r: 99, t: 59 } }])
    expect(members(headers['RateLimit-Policy'])).toEqual([{ name: '100-per-1m', params: { q: 100, w: 60 } }])
  })

  it('on a denial lists only the policies that block, each with its own wait', async () => {
    const { clock, headers } = burstAndHourly(format)
    await headers()
    clock.now += 500
    await headers()
    const denied = await headers()
    expect(denied).toEqual({
      'RateLimit-Policy': '"burst";q=2;w=1, "hourly";q=1000;w=3600',
      RateLimit: '"burst";r=0;t=1',
      'Retry-After': '1',
    })
    expect(members(denied.RateLimit)).toEqual([{ name: 'burst', params: { r: 0, t: 1 } }])
  })

  it('on a denial by several rules lists each, the longest wait equal to Retry-After', async () => {
    const clock = { now: HOUR + 59 * 60_000 } // a minute before the hour ends
    const limiter = new RateLimiter({
      rules: [
        fixedWindow({ limit: 2, window: '1m', name: 'minute' }),
        slidingWindowLog({ limit: 3, window: '1h', name: 'hour' }),
        tokenBucket({ capacity: 100, refillRate: 1, name: 'bucket' }),
      ],
      store: new MemoryStore({ clock: () => clock.now }),
    })
    await limiter.limit('k', { cost: 2 })
    clock.now += 30_000
    const headers = rateLimitHeaders(await limiter.limit('k', { cost: 2 }), { format })
    expect(headers).toEqual({
      'RateLimit-Policy': '"minute";q=2;w=60, "hour";q=3;w=3600, "bucket";q=100;w=100',
      RateLimit: '"minute";r=0;t=30, "hour";r=1;t=3570',
      'Retry-After': '3570',
    })
  })

  it('adds a keyed partition key, never the bare identifier', async () => {
    const pk = partitionKey('203.0.113.7', 'server-secret')
    expect(pk).toMatch(/^[A-Za-z0-9+/]{16}$/)
    expect(pk).toBe(partitionKey('203.0.113.7', 'server-secret'))
    expect(pk).not.toBe(partitionKey('203.0.113.7', 'other-secret'))
    const headers = rateLimitHeaders(await resultAfter(1_000, true), { format, partitionKey: pk })
    expect(headers['RateLimit']).toBe(`"100-per-1m";r=99;t=59;pk=:${pk}:`)
    expect(JSON.stringify(headers)).not.toContain('203.0.113.7')
    for (const field of [headers.RateLimit, headers['RateLimit-Policy']]) {
      const bytes = members(field)[0]!.params.pk as ArrayBuffer
      expect(Buffer.from(bytes).toString('base64')).toBe(pk)
    }
  })

  it.each([
    ['a bare IPv4 address', '203.0.113.7'],
    ['a value that would split the list', 'AAAA:, "x";r=1000'],
    ['base64 of the wrong length', 'AAAAA'],
    ['an empty string', ''],
    ['a non-string', 42],
  ])('refuses a user-supplied partition key that is %s', async (_, value) => {
    const result = await resultAfter(1_000, true)
    expect(() => rateLimitHeaders(result, { format, partitionKey: value as string })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'partitionKey' }),
    )
  })

  it('sends no empty RateLimit list when no rule still blocks a denial', async () => {
    // A cached denial whose rules' own waits have all run out: nothing true is left to list.
    const denied = await resultAfter(1_000, false)
    const result = {
      ...denied,
      rules: denied.rules.map((rule) => ({ ...rule, allowed: false, retryAfter: 0 })),
    }
    expect(rateLimitHeaders(result, { format })).toEqual({
      'RateLimit-Policy': '"100-per-1m";q=100;w=60',
      'Retry-After': '1',
    })
  })

  it('names default policies after their limit and window', async () => {
    const limiter = new RateLimiter({ rules: tokenBucket({ capacity: 10, refillRate: 1 }) })
    expect(rateLimitHeaders(await limiter.limit('k'), { format })['RateLimit-Policy']).toBe(
      '"10-per-10s";q=10;w=10',
    )
  })
})

describe('draft-8 and draft-11 differ only in `t`', () => {
  it('draft-8: the seconds until the whole quota is back; none for a full quota', async () => {
    const { headers } = burstAndHourly('draft-8')
    expect((await headers(0)).RateLimit).toBe('"burst";r=2, "hourly";r=1000')
    await headers()
    // The counter's request leaves the estimate only when the next window has passed too: 2 s.
    expect((await headers()).RateLimit).toBe('"burst";r=0;t=2, "hourly";r=998;t=3600')
  })

  it('draft-11: the effective window, never longer than the policy window; a full quota has the window', async () => {
    const { headers } = burstAndHourly('draft-11')
    expect((await headers(0)).RateLimit).toBe('"burst";r=2;t=1, "hourly";r=1000;t=3600')
    await headers()
    expect((await headers()).RateLimit).toBe('"burst";r=0;t=1, "hourly";r=998;t=3600')
  })
})

// Issue 47: a calendar quota's window is nominal (30 days a month): the effective window of a 31-day month's count is
// the time to its end, not capped at the nominal window.
describe('a quota in a 31-day month', () => {
  it('draft-11: t is the time to the period end; w is the nominal month', async () => {
    const now = Date.parse('2026-03-01T00:00:00Z')
    const limiter = new RateLimiter({
      rules: quota({ limit: 1_000, period: 'month', name: 'monthly' }),
      store: new MemoryStore({ clock: () => now, maxKeys: 10 }),
    })
    const headers = rateLimitHeaders(await limiter.limit('k'), { format: 'draft-11' })
    expect(headers.RateLimit).toBe(`"monthly";r=999;t=${31 * 86_400}`)
    expect(headers['RateLimit-Policy']).toBe(`"monthly";q=1000;w=${30 * 86_400}`)
  })
})

describe('policy names', () => {
  it('refuses two rules with one name at construction: headers could not tell them apart', () => {
    const construct = (rules: Rule[]) => () => new RateLimiter({ rules })
    expect(
      construct([fixedWindow({ limit: 10, window: '1s' }), slidingWindowLog({ limit: 10, window: '1s' })]),
    ).toThrow(expect.objectContaining({ code: 'ERR_RATEWINDOW_DUPLICATE_RULE', option: 'rules[1].name' }))
    expect(
      construct([
        fixedWindow({ limit: 10, window: '1s', name: 'api' }),
        fixedWindow({ limit: 99, window: '1h', name: 'api' }),
      ]),
    ).toThrow(/"api"/)
    expect(
      construct([
        fixedWindow({ limit: 10, window: '1s' }),
        slidingWindowLog({ limit: 10, window: '1s', name: 'log' }),
      ]),
    ).not.toThrow()
  })
})

describe('every format parses as structured fields and agrees with Retry-After', () => {
  const makers: ((name: string) => Rule)[] = [
    (name) => fixedWindow({ limit: 3, window: '2s', name }),
    (name) => slidingWindowLog({ limit: 2, window: '1500ms', name }),
    (name) => slidingWindowCounter({ limit: 4, window: '3s', name }),
    (name) => tokenBucket({ capacity: 3, refillRate: 2, name }),
  ]
  const rules = fc.uniqueArray(fc.integer({ min: 0, max: makers.length - 1 }), { minLength: 1, maxLength: 3 })
  const steps = fc.array(fc.record({ wait: fc.nat(2_500), cost: fc.constantFrom(0, 1, 1, 2) }), {
    minLength: 1,
    maxLength: 30,
  })

  it('holds for random rule sets and traffic', async () => {
    await fc.assert(
      fc.asyncProperty(rules, steps, async (chosen, trace) => {
        let now = 1_700_000_000_000
        const limiter = new RateLimiter({
          rules: chosen.map((index) => makers[index]!(`p${index}`)),
          store: new MemoryStore({ clock: () => now }),
        })
        for (const { wait, cost } of trace) {
          now += wait
          const result = await limiter.limit('k', { cost })
          checkHeaders(result)
        }
      }),
      { numRuns: 150 },
    )
  })
})

describe('reset headers: one rule on every response (issue 20)', () => {
  const makers: (() => Rule)[] = [
    () => fixedWindow({ limit: 3, window: '2s' }),
    () => slidingWindowLog({ limit: 2, window: '1500ms' }),
    () => slidingWindowCounter({ limit: 4, window: '3s' }),
    () => tokenBucket({ capacity: 3, refillRate: 2 }),
    () => gcra({ limit: 3, window: '3s', burst: 2 }),
  ]
  const steps = fc.array(fc.record({ wait: fc.nat(2_500), cost: fc.constantFrom(1, 1, 2) }), {
    minLength: 1,
    maxLength: 30,
  })

  it('at remaining 0 the next request passes after the announced wait and not a millisecond before', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: makers.length - 1 }), steps, async (index, trace) => {
        let now = 1_700_000_000_000
        const limiter = new RateLimiter({
          rules: makers[index]!(),
          store: new MemoryStore({ clock: () => now }),
        })
        for (const { wait, cost } of trace) {
          now += wait
          const result = await limiter.limit('k', { cost })
          const announced = headerReset(result)
          if (result.remaining > 0) {
            expect(announced).toBe(result.reset)
            continue
          }
          // Admitted: a cost-1 request. Refused: this request again (Retry-After; the same for cost 1).
          if (!result.allowed) expect(announced).toBe(result.retryAfter)
          const next = { cost: result.allowed ? 1 : cost }
          const decided = now
          now = decided + announced
          expect((await limiter.peek('k', next)).allowed).toBe(true)
          now = decided + announced - 1
          expect((await limiter.peek('k', next)).allowed).toBe(false)
          now = decided
        }
      }),
      { numRuns: 200 },
    )
  })

  it('3 per 10 s (the default algorithm): the third request and the 429 announce the same wait', async () => {
    let now = 1_700_000_000_000
    const limiter = new RateLimiter({
      rules: slidingWindowCounter({ limit: 3, window: '10s' }),
      store: new MemoryStore({ clock: () => now }),
    })
    const resets: (string | undefined)[] = []
    for (let i = 0; i < 4; i++) {
      const result = await limiter.limit('k')
      resets.push(/reset=(\d+)/.exec(rateLimitHeaders(result, { format: 'draft-7' }).RateLimit!)?.[1])
      now += 1_000
    }
    // The third request and the 429 both announce 13.34 s after the first (before: 18 s on the third).
    expect(resets).toEqual(['20', '19', '12', '11'])
  })
})

/** The invariants of every format for one decision, read back with the independent parser. */
function checkHeaders(result: RateLimitResult): void {
  const retryAfter = result.allowed ? undefined : Number(rateLimitHeaders(result)['Retry-After'])
  for (const format of ['draft-8', 'draft-11'] as const) {
    const headers = rateLimitHeaders(result, { format })
    const policies = members(headers['RateLimit-Policy'])
    expect(policies.map(({ name }) => name)).toEqual(result.rules.map(({ rule }) => rule.name))
    for (const { params } of policies) {
      expect(params.q).toSatisfy((q) => Number.isInteger(q) && (q as number) > 0)
      expect(params.w).toSatisfy((w) => Number.isInteger(w) && (w as number) > 0)
    }
    const limits = members(headers.RateLimit)
    for (const { name, params } of limits) {
      expect(policies.some((policy) => policy.name === name)).toBe(true)
      expect(params.r).toSatisfy((r) => Number.isInteger(r) && (r as number) >= 0)
      if (format === 'draft-11' || params.t !== undefined) {
        expect(params.t).toSatisfy((t) => Number.isInteger(t) && (t as number) > 0)
      }
      // A rule with nothing left announces when the next request passes: never after Retry-After.
      if (retryAfter !== undefined && params.r === 0) expect(params.t).toBeLessThanOrEqual(retryAfter)
    }
    if (retryAfter !== undefined) {
      expect(limits.length).toBeGreaterThan(0)
      if (limits.every(({ params }) => params.r === 0))
        expect(Math.max(...limits.map(({ params }) => params.t as number))).toBe(retryAfter)
    } else {
      expect(limits).toHaveLength(result.rules.length)
    }
  }
  for (const format of ['draft-6', 'draft-7'] as const) {
    const limits = members(rateLimitHeaders(result, { format })['RateLimit-Policy']).map(({ name }) => name)
    expect(new Set(limits).size).toBe(limits.length)
  }
  const draft7 = parseDictionary(rateLimitHeaders(result, { format: 'draft-7' }).RateLimit!)
  // One rule on every response (issue 20): at remaining 0 the wait for the next request (on a denial,
  // Retry-After), otherwise the wait for the whole quota.
  if (result.remaining === 0 && retryAfter !== undefined) expect(draft7.get('reset')?.[0]).toBe(retryAfter)
  if (result.remaining > 0) expect(draft7.get('reset')?.[0]).toBe(Math.ceil(result.reset / 1000))
}

describe('legacy and off', () => {
  it('X-RateLimit-Reset is epoch seconds of the reset, opt-in', async () => {
    const result = await resultAfter(12_000, true)
    expect(rateLimitHeaders(result, { format: false, legacy: true })).toEqual({
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Remaining': '99',
      'X-RateLimit-Reset': String(Math.ceil((result.at + 12_000) / 1000)),
    })
  })

  it('format false writes only Retry-After on a denial', async () => {
    expect(rateLimitHeaders(await resultAfter(1_500, true), { format: false })).toEqual({})
    expect(rateLimitHeaders(await resultAfter(1_500, false), { format: false })).toEqual({
      'Retry-After': '2',
    })
  })

  it('rejects an unknown format by name', async () => {
    const result = await resultAfter(1, true)
    expect(() => rateLimitHeaders(result, { format: 'draft-9' as never })).toThrow(/`headers`.*'draft-11'/)
  })
})
