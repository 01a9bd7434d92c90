/** Store failures as a team logs them (issue 21, item 6): lines that name the limiter, and the default throttle. */
import { type FailureContext, fixedWindow, RateLimiter, type Store } from '@ratewindow/core'
import { type FrameworkBinding, SlowDownEngine } from '@ratewindow/core/adapter'
import { afterEach, describe, expect, it, vi } from 'vitest'

const failing: Store = {
  consume: () => Promise.reject(new Error('connection refused')),
  peek: () => Promise.reject(new Error('connection refused')),
  refund: () => Promise.reject(new Error('connection refused')),
  reset: () => Promise.reject(new Error('connection refused')),
}

afterEach(() => {
  vi.useRealTimers()
  vi.restoreAllMocks()
})

describe('logging store failures', () => {
  it('onError hears which limiter failed', async () => {
    const contexts: FailureContext[] = []
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store: failing,
      name: 'api',
      onError: (_error, context) => contexts.push(context),
    })
    await limiter.limit('client')
    expect(contexts).toEqual([{ operation: 'consume', key: 'client', limiter: 'api' }])
  })

  it('the default log names the limiter and the operation, writes the first failure, then one line per 10 s with the count not written', async () => {
    vi.useFakeTimers({ toFake: ['performance'] })
    const lines: string[] = []
    vi.spyOn(console, 'error').mockImplementation((line: string) => void lines.push(line))
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 5, window: '1m' }),
      store: failing,
      name: 'login',
      circuitBreaker: false,
    })
    for (let i = 0; i < 4; i++) await limiter.limit('client')
    expect(lines).toEqual(['[ratewindow] store failure in limiter login (consume): connection refused'])
    vi.advanceTimersByTime(10_000)
    await limiter.limit('client')
    expect(lines[1]).toBe(
      '[ratewindow] store failure in limiter login (consume) (and 3 more since the last report): connection refused',
    )
  })

  it.each([
    [undefined, 'slowDown()'],
    ['search', 'limiter search'],
  ])(
    'the default log names a slowDown() (name %s) as its user knows it, not by its hashed namespace (issue 32, item 18)',
    async (name, owner) => {
      const lines: string[] = []
      vi.spyOn(console, 'error').mockImplementation((line: string) => void lines.push(line))
      const binding: FrameworkBinding<{ ip: string }> = {
        name: 'Test',
        clientIp: (request) => request.ip,
        untrustedForwardedFor: () => undefined,
        trustProxyHint: '',
      }
      const slow = new SlowDownEngine({ store: failing, name, circuitBreaker: false }, binding)
      const client = { ip: '192.0.2.1' }
      await slow.decide(client, [client])
      expect(lines).toEqual([`[ratewindow] store failure in ${owner} (consume): connection refused`])
      expect(lines[0]).not.toContain(slow.namespace)
    },
  )
})
