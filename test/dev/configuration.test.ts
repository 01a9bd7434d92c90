/**
 * Configuration as teams write it (issue 21, items 4 and 5): limiting switched off for tests or an environment,
 * and values from environment variables.
 */
import { MemoryStore, RateLimiter, type RateLimiterOptions, slidingWindowCounter } from '@ratewindow/core'
import { HttpRateLimiter } from '@ratewindow/core/adapter'
import { rateLimit } from '@ratewindow/express'
import { afterEach, describe, expect, it } from 'vitest'
import { FRAMEWORKS, type RunningApp } from '../http/harness.js'

const running: RunningApp[] = []
afterEach(async () => {
  await Promise.all(running.splice(0).map((app) => app.close()))
})

describe.each(FRAMEWORKS)('$name: switching limiting off', (framework) => {
  it.each([
    ['enabled: false', { enabled: false }],
    ['skip: true', { skip: true }],
  ] as const)('%s: no decision, no headers, request.rateLimit unset, no store call', async (_, off) => {
    let storeCalls = 0
    const memory = new MemoryStore()
    const store = Object.assign(Object.create(memory) as MemoryStore, {
      consume: (...args: Parameters<MemoryStore['consume']>) => {
        storeCalls++
        return memory.consume(...args)
      },
    })
    const app = await framework.start({ global: { limit: 1, store, ...off } })
    running.push(app)
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${app.url}/`)
      expect(response.status).toBe(200)
      expect([...response.headers.keys()].filter((name) => /ratelimit|retry-after/i.test(name))).toEqual([])
    }
    expect(await (await fetch(`${app.url}/state`)).text()).toMatch(/^(null|)$/)
    expect(storeCalls).toBe(0)
  })
})

describe('switching limiting off: the option itself', () => {
  it('is checked as a boolean, with the comparison to write for an environment variable', () => {
    expect(() => rateLimit({ enabled: 'false' as never })).toThrow(
      expect.objectContaining({
        code: 'ERR_RATEWINDOW_INVALID_OPTION',
        option: 'enabled',
        message: expect.stringMatching(/true or false.*process\.env\.RATE_LIMIT !== 'off'/),
      }),
    )
    expect(() => rateLimit({ skip: 'yes' as never })).toThrow(expect.objectContaining({ option: 'skip' }))
    expect(() => rateLimit({ skip: false, enabled: true })).not.toThrow()
  })

  it('skip: false and enabled: true limit as usual', async () => {
    const binding = {
      name: 'test',
      clientIp: () => '192.0.2.1',
      untrustedForwardedFor: () => undefined,
      trustProxyHint: '',
    }
    const engine = new HttpRateLimiter<object>({ limit: 1, skip: false, enabled: true }, binding)
    expect((await engine.decide({}))?.result.allowed).toBe(true)
    expect((await engine.decide({}))?.result.allowed).toBe(false)
  })
})

describe('values from the environment', () => {
  const env = { WINDOW: '60000', TIMEOUT: '250', LIMIT: '100', COST: '2', MAX_KEYS: '5000' }

  it('accepts digit strings where a duration is expected, as milliseconds', () => {
    const middleware = rateLimit({ window: env.WINDOW as '60000', timeout: env.TIMEOUT as '250' })
    expect(middleware).toBeTypeOf('function')
    const rule = slidingWindowCounter({ limit: 5, window: ' 60000 ' as '60000' })
    expect(rule.windowMs).toBe(60_000)
    expect(new MemoryStore({ sweepInterval: '30000' })).toBeInstanceOf(MemoryStore)
  })

  it('still refuses durations that are not whole positive milliseconds', () => {
    for (const window of ['0', '-5', '1.5', '60000x', '']) {
      expect(() => slidingWindowCounter({ limit: 5, window: window as '1' })).toThrow(
        expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_WINDOW', option: 'window' }),
      )
    }
  })

  it('keeps counts numbers, and says to write Number(process.env.X)', () => {
    expect(() => rateLimit({ limit: env.LIMIT as never })).toThrow(
      expect.objectContaining({
        code: 'ERR_RATEWINDOW_INVALID_LIMIT',
        message: expect.stringContaining('`limit: Number(process.env.LIMIT)`'),
      }),
    )
    expect(() => rateLimit({ cost: env.COST as never })).toThrow(
      expect.objectContaining({ message: expect.stringContaining('`cost: Number(process.env.COST)`') }),
    )
    expect(() => new MemoryStore({ maxKeys: env.MAX_KEYS as never })).toThrow(
      expect.objectContaining({
        message: expect.stringContaining('`maxKeys: Number(process.env.MAX_KEYS)`'),
      }),
    )
    const options = {
      rules: slidingWindowCounter({ limit: 5, window: '1m' }),
      timeout: '250',
    } as RateLimiterOptions
    expect(() => new RateLimiter(options)).not.toThrow()
  })

  it.each([0, Number.NaN, 1.5, -1])(
    'refuses a constant limit %s with a message about the constant, not the `limit` function',
    (limit) => {
      let error: Error | undefined
      try {
        rateLimit({ limit })
      } catch (caught) {
        error = caught as Error
      }
      expect(error).toMatchObject({ code: 'ERR_RATEWINDOW_INVALID_LIMIT', option: 'limit' })
      expect(error!.message).not.toMatch(/function/)
      if (limit === 0) expect(error!.message).toMatch(/enabled: false/)
    },
  )
})
